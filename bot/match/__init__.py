"""Matching: which new papers each subscriber's rules select (the matcher's index over every
rule) and what goes in a digest (select, deduplicate, rank, cap, group). Pure."""
