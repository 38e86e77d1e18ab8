"""Tests of the spark package."""
