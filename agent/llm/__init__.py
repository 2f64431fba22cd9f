"""The optional language-model layer: a tool-calling agent over the same retrieval and probes."""
