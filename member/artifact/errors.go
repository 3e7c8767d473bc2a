package artifact

import (
	"errors"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

// Error is one problem in a YAML file of this package (an artifact's murmur.yaml, murmur.lock,
// sources.yaml), or in an artifact's files: where it is, what is wrong, and what to write instead.
type Error = yamldoc.Error

// yamlDoc reads one file of this package; the package's own readers (pin, ownerID, localPath, ...) are
// its methods.
type yamlDoc struct{ yamldoc.Doc }

// addNameError adds the problem of a name or version that does not parse (err, a *NameError): its
// message after prefix, and its fix.
func (d *yamlDoc) addNameError(line int, prefix string, err error) {
	var ne *NameError
	errors.As(err, &ne)
	d.Add(line, prefix+ne.Msg, ne.Fix)
}
