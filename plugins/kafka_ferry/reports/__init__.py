"""Reports a person reads: per-run HTML pages (batch, promotion) with a lag chart, and the migrations overview."""
