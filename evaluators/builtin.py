"""Imports every module that registers built-in scorers."""
