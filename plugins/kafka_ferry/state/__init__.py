"""The migration's state topic: every record kind declared once, and the store that reads and writes them."""
