// Package yamldoc reads one YAML file through yaml.v3 nodes so that every problem carries its file and
// line, and collects the problems instead of stopping at the first: strict keys (an unknown key is named
// with the nearest known one, "did you mean"), repeated keys, type errors that say what to write, and a
// syntax error placed on the line where the mistake is. roster.yaml, a capsule's murmur.yaml, a script
// driver's script.yaml and the artifact files (murmur.yaml, murmur.lock, sources.yaml) all read through
// it, so they speak with one voice.
//
// Concurrency: a Doc belongs to the one goroutine that parses its file; the package has no shared state.
//
// Imports: stdlib, yaml.v3 and levenshtein only; never a murmur package.
package yamldoc
