"""Measurement harness shared by every study: timing, statistics, ceilings, provenance, kernel builds."""
