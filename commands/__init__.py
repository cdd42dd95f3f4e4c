"""The `dbi` command line: the top floor, above every package it runs."""
