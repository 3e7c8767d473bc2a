// Package reftest holds the test that checks docs/reference.md against the parsers of roster.yaml,
// murmur.yaml and script.yaml: it has no code of its own.
package reftest
