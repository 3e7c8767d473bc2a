package artifact

import "github.com/murmur-run/murmur/internal/yamldoc"

// Error is one problem in a YAML file of this package (an artifact's murmur.yaml, murmur.lock,
// sources.yaml), or in an artifact's files: where it is, what is wrong, and what to write instead.
type Error = yamldoc.Error

// yamlDoc reads one file of this package; the package's own readers (pin, ownerID, localPath, ...) are
// its methods.
type yamlDoc struct{ yamldoc.Doc }
