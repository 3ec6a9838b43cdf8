"""Analysis of run records: flat tables (aggregate), bootstrap intervals (stats), the measured tables and paper
claims with verdicts (tables, claims, report), the analytic models (scale_model, recsys24_model, compression,
redundancy) and the figures (plots/)."""
