"""Test utilities for specframe and its plugin authors."""
