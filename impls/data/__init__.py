"""The data layer: synthetic generators, presets, and one batch type for every source."""
