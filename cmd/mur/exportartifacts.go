package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/capsule"
)

// usedArtifact is an artifact a member's capsule declares (tools:, skills:, hooks:), as staging finds
// it in the project store or the global store.
type usedArtifact struct {
	member string
	a      *artifact.Artifact
}

// usedArtifacts returns the artifacts every member's capsule declares, in roster order, found as
// staging finds them. What staging would refuse (an artifact no store holds, a pin that differs) is
// written to warn, for mur check and the member's start to say in full, and left out.
func usedArtifacts(l *layout, getenv func(string) string, warn io.Writer) ([]usedArtifact, error) {
	stores := artifact.Stores(l.r.Dir, getenv, getenv("HOME"))
	var out []usedArtifact
	for _, m := range l.r.Members {
		c, err := capsule.Load(m.Capsule)
		if err != nil {
			return nil, err
		}
		lockPath := artifact.LockPath(c.Dir)
		arts, err := artifact.StageDeclared(context.Background(), stores, lockPath, artifact.Declared{Tools: c.Tools, Skills: c.Skills, Hooks: c.Hooks}, false)
		if err != nil {
			fmt.Fprintf(warn, "mur export: member %s's artifacts do not stage, so the exported formation will not start it (mur check --roster %s says why):\n%v\n", m.Name, shellQuote(l.r.Path), err)
			continue
		}
		lock, err := artifact.ReadLock(lockPath)
		if err != nil {
			return nil, err
		}
		for _, a := range arts {
			if !lock.PinsDeclared(a) {
				fmt.Fprintf(warn, "mur export: %s does not pin %s@%s yet, and in the containers the capsule's directory is read-only: run the formation once (mur run --roster %s), which pins it, then export again\n",
					lockPath, a.Manifest.Name, a.Manifest.Version, shellQuote(l.r.Path))
			}
			out = append(out, usedArtifact{member: m.Name, a: a})
		}
	}
	return out, nil
}

// inProjectStore is where artifact a goes in the containers: the project store beside the roster, as a
// path relative to the layout's root with slashes.
func (l *layout) inProjectStore(a *artifact.Artifact) string {
	ref := a.Ref()
	return path.Join(strings.TrimPrefix(relSlash(l.root, artifact.ProjectStoreDir(l.r.Dir)), "./"), ref.Name.Scope(), ref.Name.Tool(), ref.Version)
}

// artifactFiles walks a's directory: each regular file with its path relative to it, with slashes.
func artifactFiles(a *artifact.Artifact, fn func(rel, abs string) error) error {
	return filepath.WalkDir(a.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(a.Dir, path)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), path)
	})
}

// globalOnly warns of the artifacts the compose file's containers cannot see: the project store is in
// the formation's bind mount, the global store is not.
func globalOnly(used []usedArtifact, l *layout, warn io.Writer) {
	for _, u := range used {
		if u.a.Place == artifact.GlobalStore {
			fmt.Fprintf(warn, "mur export: member %s uses %s from the global store (%s), which its container cannot see: copy that directory to %s, the project store the formation's mount holds\n",
				u.member, u.a.Ref(), u.a.Dir, filepath.Join(l.root, filepath.FromSlash(l.inProjectStore(u.a))))
		}
	}
}
