"""Tests of the orchestration package."""
