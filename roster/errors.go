package roster

import "github.com/murmur-run/murmur/internal/yamldoc"

// Error is one problem in a roster.yaml: where it is, what is wrong, and what to write instead.
type Error = yamldoc.Error
