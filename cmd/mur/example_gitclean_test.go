package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// leavesGitStatusClean checks that every file a run of an example wrote into its copy (a file the
// example's folder does not have) is one the repository's .gitignore ignores, so running the example in
// place leaves git status clean. skip lists top-level names the test itself made in the copy (its
// records directory). Without git on the machine there is nothing to ask, and the check says so.
func leavesGitStatusClean(t *testing.T, example, copy string, skip ...string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Log("git is not installed: not checking that the example leaves git status clean")
		return
	}
	inRepo := exec.Command("git", "rev-parse", "--is-inside-work-tree")
	inRepo.Dir = "../.."
	if err := inRepo.Run(); err != nil {
		t.Log("not in a git work tree: not checking that the example leaves git status clean")
		return
	}
	orig := filepath.Join("../../deploy/examples", example)
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[s] = true
	}
	filepath.WalkDir(copy, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(copy, p)
		if top, _, _ := strings.Cut(filepath.ToSlash(rel), "/"); skipped[top] {
			return nil
		}
		if _, err := os.Lstat(filepath.Join(orig, rel)); err == nil {
			return nil // the example's own file
		}
		repoPath := filepath.ToSlash(filepath.Join("deploy/examples", example, rel))
		cmd := exec.Command("git", "check-ignore", "--no-index", "-q", repoPath)
		cmd.Dir = "../.."
		if err := cmd.Run(); err != nil {
			t.Errorf("running the %s example writes %s, which .gitignore does not ignore: git status would show it", example, repoPath)
		}
		return nil
	})
}
