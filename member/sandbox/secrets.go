package sandbox

import (
	"strings"

	"github.com/murmur-run/murmur/internal/peercred"
)

// Secret is a value no program the runtime starts may find in its environment: the operator token, the
// formation token, a control token. What names it where a dropped entry is logged or recorded; Value is
// never shown.
type Secret struct {
	What  string // "the operator token", "control token ops"
	Value string
}

// Dropped is an environment entry a filter left out: the variable's name and why, never its value.
type Dropped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// minContained is the shortest secret looked for inside a longer value. A shorter one (an operator's own
// choice; mur's are 68 characters) is dropped only where it is the whole value: looked for inside values,
// a token of a few characters would drop unrelated ones (a path) by chance, and it protects nothing a
// guess could not find.
const minContained = 8

// DropSecrets returns env less every entry that may carry a secret of the runtime's, and what it left
// out: a name of the runtime's token variables (MUR_…TOKEN…); a value that is one of secrets, or holds
// one (of minContained bytes or more); a value that holds a peer credential, of this formation or any
// other, recognised by its form (peercred.Contains). env is not changed.
func DropSecrets(env []string, secrets []Secret) (kept []string, dropped []Dropped) {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if why := secretIn(k, v, secrets); why != "" {
			dropped = append(dropped, Dropped{Name: k, Reason: why})
			continue
		}
		kept = append(kept, kv)
	}
	return kept, dropped
}

// SecretFree is DropSecrets without the account of what was dropped. A command's environment is built
// from scratch; this is the guard that keeps it free of secrets when someone adds to it.
func SecretFree(env []string, secrets []Secret) []string {
	kept, _ := DropSecrets(env, secrets)
	return kept
}

// secretIn says why the variable name=value may not be passed on; "" when it may.
func secretIn(name, value string, secrets []Secret) string {
	if strings.HasPrefix(name, "MUR_") && strings.Contains(name, "TOKEN") {
		return "its name is one of the runtime's token variables (MUR_…TOKEN…)"
	}
	for _, s := range secrets {
		switch {
		case s.Value == "":
		case value == s.Value:
			return "its value is " + s.What
		case len(s.Value) >= minContained && strings.Contains(value, s.Value):
			return "its value holds " + s.What
		}
	}
	if peercred.Contains(value) {
		return "its value holds a member's peer credential (murp1.…)"
	}
	return ""
}
