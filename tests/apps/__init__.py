"""End-to-end tests of the example apps in apps/."""
