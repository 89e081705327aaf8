"""The cutover: every route's outcome, the step tables and their names, staged cutover, rollback plans, who may cut
over, the signed evidence of what was done."""
