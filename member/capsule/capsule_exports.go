package capsule

import (
	"fmt"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/internal/yamldoc"
)

// exports reads exports.peer_files: the export root alone (peer_files: out), or with the lifetime of the
// handles share-file mints (peer_files: {root: out, ttl: 2h}).
func (p *capsuleParser) exports(v *yaml.Node) {
	d, c := p.d, p.c
	root := func(v *yaml.Node, path string) {
		s, ok := d.Text(v, path)
		if !ok {
			return
		}
		c.Exports.PeerFiles = s
		fix := "write a directory inside the workdir, such as " + yamldoc.LastKey(path) + ": out"
		switch {
		case s == "":
			d.Add(v.Line, path+" is empty", fix+" (. for the whole workdir), or remove the key")
		case filepath.IsAbs(s):
			d.Add(v.Line, fmt.Sprintf("%s %q is an absolute path, but the export root is relative to the workdir", path, s), fix)
		case !filepath.IsLocal(s):
			d.Add(v.Line, fmt.Sprintf("%s %q leaves the workdir", path, s), fix)
		}
	}
	d.Fields(v, "exports", []yamldoc.Field{{Name: "peer_files", Fn: func(k, v *yaml.Node) {
		if !yamldoc.IsMapping(v) {
			root(v, "exports.peer_files")
			return
		}
		rootSet := false
		d.Fields(v, "exports.peer_files", []yamldoc.Field{
			{Name: "root", Fn: func(_, v *yaml.Node) { rootSet = true; root(v, "exports.peer_files.root") }},
			{Name: "ttl", Fn: func(_, v *yaml.Node) {
				s, ok := d.Text(v, "exports.peer_files.ttl")
				if !ok {
					return
				}
				ttl, err := time.ParseDuration(s)
				switch {
				case err != nil:
					d.Add(v.Line, fmt.Sprintf("exports.peer_files.ttl %q is not a duration", s),
						"write a number with a unit, such as ttl: 1h, ttl: 30m or ttl: 90s")
				case ttl < time.Second:
					d.Add(v.Line, fmt.Sprintf("exports.peer_files.ttl %q is shorter than a second", s),
						"write at least 1s, such as ttl: 1h, or remove the key for the default of 1h")
				default:
					c.Exports.PeerFilesTTL = ttl
				}
			}},
		})
		if !rootSet {
			d.Add(v.Line, "exports.peer_files has no root", "add the export root, such as peer_files: {root: out, ttl: 1h}")
		}
	}}})
}
