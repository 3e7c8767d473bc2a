package server

import "github.com/murmur-run/murmur/member/sandbox"

// memberSecrets are the secrets besides the formation token (which the session holds as FormationToken)
// that no program a member starts may find in its environment: the operator token and the member's
// control tokens (sandbox.DropSecrets). Each is named for the log by what it is, never by its value.
func memberSecrets(t Tokens, control []ControlToken) []sandbox.Secret {
	out := []sandbox.Secret{{What: "the operator token", Value: t.Operator}}
	for _, c := range control {
		out = append(out, sandbox.Secret{What: "control token " + c.ID, Value: c.Token})
	}
	return out
}
