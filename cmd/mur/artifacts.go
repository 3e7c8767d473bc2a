package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/roster"
)

// projectDir is where a capsule's project store is: beside the roster when one is named, else beside
// the capsule (DESIGN §10).
func projectDir(capsuleDir, rosterPath string) (string, error) {
	if rosterPath == "" {
		return capsuleDir, nil
	}
	r, err := roster.Load(rosterPath)
	if err != nil {
		return "", usageError{err}
	}
	return r.Dir, nil
}

// cmdPull pins one artifact for a capsule as the operator: mur pull --capsule DIR scope/name[@version].
func cmdPull(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("pull", "mur pull --capsule DIR [--roster FILE] scope/name[@version]", stderr)
	capsuleDir := fs.String("capsule", "", "the capsule directory whose murmur.lock pins the artifact (required)")
	rosterPath := fs.String("roster", "", "the formation's roster.yaml: the project store is beside it (default: beside the capsule)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *capsuleDir == "" {
		return usagef("--capsule is required: name the capsule directory whose murmur.lock pins the artifact")
	}
	if fs.NArg() != 1 {
		return usagef("name one artifact to pin, such as mur pull --capsule %s local/tool-edit@1.0.0", *capsuleDir)
	}
	c, err := capsule.Load(*capsuleDir)
	if err != nil {
		return usageError{err}
	}
	ref, err := artifact.ParseRef(fs.Arg(0))
	if err != nil {
		return usageError{err}
	}
	if err := artifact.CheckReserved(string(ref.Name)); err != nil {
		return usageError{err}
	}
	proj, err := projectDir(c.Dir, *rosterPath)
	if err != nil {
		return err
	}
	lockPath := artifact.LockPath(c.Dir)
	stores := artifact.Stores(proj, getenv, getenv("HOME"))
	// A scope .murmur/sources.yaml maps to a GitHub source is fetched from it when no store holds the
	// version asked for (or, without one, any version that fits), and the release is kept in the project
	// store: the operator's pull installs, so that staging finds it without the network.
	sources, err := artifact.ReadSources(artifact.SourcesPath(proj))
	if err != nil {
		return usageError{err}
	}
	finder := &artifact.Finder{Stores: stores, Sources: sources}
	if len(sources) > 0 {
		finder.Fetcher = &artifact.Fetcher{Base: artifact.GitHubBase(getenv)}
	}
	var pinned artifact.Pin
	var kept string
	err = artifact.UpdateLock(ctx, lockPath, func(l *artifact.Lock) error {
		r := ref
		if p, ok := l.Get(r.Name); ok && r.Version == "" {
			r.Version = p.Version
		}
		f := *finder
		f.Owners = l.Owners
		found, notes, err := f.Find(ctx, r)
		for _, n := range notes {
			fmt.Fprintln(stderr, "mur: note:", n)
		}
		if err != nil {
			var rf *artifact.Refusal
			if errors.As(err, &rf) {
				if rf.Code != "" {
					return usagef("%s: %s", rf.Code, rf.Msg)
				}
				return usagef("%s", rf.Msg)
			}
			return err
		}
		defer func() {
			// A fetched copy left in the temporary directory is litter, not a failed pull.
			if err := found.Close(); err != nil {
				fmt.Fprintln(stderr, "mur: note: removing the fetched copy:", err)
			}
		}()
		pin := found.Pin(artifact.OriginOperator)
		if err := l.Verify(pin); err != nil {
			return err
		}
		if found.Owner != 0 {
			// Fetched: checked like a stored artifact, now kept in the project store.
			dir := artifact.Store{Place: artifact.ProjectStore, Dir: artifact.ProjectStoreDir(proj)}.Path(found.Ref())
			if _, err := artifact.CopyTo(found.Artifact, dir); err != nil {
				return fmt.Errorf("keeping %s in the project store: %w", found.Ref(), err)
			}
			kept = dir
		}
		pinned = pin
		return l.Add(pinned)
	})
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return err
		}
		return usageError{err}
	}
	if kept != "" {
		fmt.Fprintf(stdout, "pinned %s@%s (%s) from %s (owner id %d), kept in %s, in %s\n", pinned.Name, pinned.Version, pinned.Digest, pinned.Source, pinned.Owner, kept, lockPath)
	} else {
		fmt.Fprintf(stdout, "pinned %s@%s (%s) from the %s in %s\n", pinned.Name, pinned.Version, pinned.Digest, pinned.Source, lockPath)
	}
	if !declaresAt(c, pinned.Name) {
		fmt.Fprintf(stdout, "%s is not declared in %s yet: add it under tools:, skills: or hooks: (by its role) to give it to the session\n", pinned.Name, c.Path)
	}
	return nil
}

// declaresAt reports whether c declares name at some version.
func declaresAt(c *capsule.Capsule, name artifact.Name) bool {
	for _, list := range [][]string{c.Tools, c.Skills, c.Hooks} {
		for _, s := range list {
			if r, err := artifact.ParseRef(s); err == nil && r.Name == name {
				return true
			}
		}
	}
	return false
}

// cmdList lists the artifacts a capsule's murmur.lock pins. Runtime-provided tools are never pinned, so
// never listed.
func cmdList(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("list", "mur list [--capsule DIR]", stderr)
	capsuleDir := fs.String("capsule", ".", "the capsule directory whose murmur.lock to list")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("mur list takes no arguments; name the capsule with --capsule DIR")
	}
	path := artifact.LockPath(*capsuleDir)
	l, err := artifact.ReadLock(path)
	if err != nil {
		return usageError{err}
	}
	if len(l.Pins) == 0 {
		abs, _ := filepath.Abs(path)
		fmt.Fprintf(stdout, "no artifacts are pinned in %s\n", abs)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ARTIFACT\tVERSION\tORIGIN\tSOURCE\tDIGEST")
	for _, p := range l.Pins {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.Version, p.Origin, p.Source, p.Digest)
	}
	return tw.Flush()
}
