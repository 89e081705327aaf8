"""What every other part of core stands on: the error base, dates, flags, cluster descriptions and their Java client
form, the state topic's record kinds."""
