package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// initFiles is the formation mur init writes: two members on the script driver, offline. Its roster
// names the formation __FORMATION__, replaced by a name made from the folder's.
//
//go:embed initfiles
var initFiles embed.FS

// initWrites are the files mur init writes, by their path in initFiles and in the folder written to.
// The .gitignore is written only where none exists: a folder inside a repository keeps its own.
var initWrites = []struct{ src, dst string }{
	{"roster.yaml", "roster.yaml"},
	{"entry/murmur.yaml", "entry/murmur.yaml"},
	{"entry/script.yaml", "entry/script.yaml"},
	{"worker/murmur.yaml", "worker/murmur.yaml"},
	{"worker/script.yaml", "worker/script.yaml"},
}

// initSend is the task the next command mur init prints sends: entry hands it to worker.
const initSend = "make this loud"

// cmdInit writes a working formation into a folder: mur init [DIR].
func cmdInit(_ context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	flags := newFlags("init", "mur init [DIR]   (DIR defaults to the current folder)", stderr)
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if flags.NArg() > 1 {
		return usagef("mur init takes one folder, not %d: mur init [DIR]", flags.NArg())
	}
	dir := "."
	if flags.NArg() == 1 {
		dir = flags.Arg(0)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return usagef("mur init %s: %v", dir, err)
	}
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		return usagef("mur init %s: %s is a file, not a folder; name a folder to write the formation into", dir, dir)
	}
	var existing []string
	for _, w := range initWrites {
		p := filepath.Join(dir, filepath.FromSlash(w.dst))
		if _, err := os.Lstat(p); err == nil {
			existing = append(existing, p)
		}
	}
	if len(existing) > 0 {
		verb := "exists"
		if len(existing) > 1 {
			verb = "exist"
		}
		return usagef("%s already %s: mur init replaces no file, so nothing was written. Write the formation "+
			"into a new folder (mur init my-formation), or move those files away first", strings.Join(existing, ", "), verb)
	}
	name := formationName(filepath.Base(abs))
	var written []string
	for _, w := range initWrites {
		b, err := initFiles.ReadFile("initfiles/" + w.src)
		if err != nil {
			return err
		}
		body := strings.ReplaceAll(string(b), "__FORMATION__", name)
		p := filepath.Join(dir, filepath.FromSlash(w.dst))
		if err := writeNew(p, body); err != nil {
			return errors.Join(err, fmt.Errorf("wrote %d of %d files before that: %s", len(written), len(initWrites), strings.Join(written, ", ")))
		}
		written = append(written, p)
	}
	ignore := filepath.Join(dir, ".gitignore")
	if b, err := initFiles.ReadFile("initfiles/gitignore"); err == nil {
		if err := writeNew(ignore, string(b)); errors.Is(err, fs.ErrExist) {
			fmt.Fprintf(stderr, "mur init: kept the existing %s: add .murmur/ to it, where mur run keeps the formation's tokens\n", ignore)
		} else if err != nil {
			return err
		}
	}
	rosterPath := filepath.Join(dir, "roster.yaml")
	fmt.Fprintf(stdout, "wrote the %s formation: members entry and worker, on the offline script driver\n", name)
	for _, p := range written {
		fmt.Fprintf(stdout, "  %s\n", p)
	}
	fmt.Fprintf(stdout, "\nstart it (it runs until Ctrl-C):\n  mur run --roster %s\n", shellQuote(rosterPath))
	fmt.Fprintf(stdout, "then, in a second terminal, from this folder:\n  mur send --roster %s --wait %s\n", shellQuote(rosterPath), shellQuote(initSend))
	fmt.Fprintf(stdout, "\nentry/murmur.yaml says how to point a member at a real model; the script.yaml files are the offline stand-ins.\n")
	return nil
}

// writeNew creates the file at path with body, and the folders above it; it never replaces a file.
func writeNew(path, body string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, body); err != nil {
		_ = f.Close() // already failing: the error returned says what went wrong
		return err
	}
	return f.Close()
}

var notNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// formationName makes a formation's name from a folder's: lower case letters, digits and dashes, or
// "first" when nothing of it is left.
func formationName(folder string) string {
	n := strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(folder), "-"), "-")
	if n == "" {
		return "first"
	}
	return n
}

// shellQuote returns s as a POSIX shell reads it back as one word: as it is when it holds nothing the
// shell treats specially, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
