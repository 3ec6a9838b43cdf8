"""Analysis of run records: flat tables (aggregate), intervals paired by round (stats), the measured tables and paper
claims with verdicts (tables, claims, report), the analytic models (scale_model, recsys24_model, compression,
redundancy) and the figures (plots/)."""
