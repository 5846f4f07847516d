"""Workload readers and generators: each turns its input into a list of `Task`s."""
