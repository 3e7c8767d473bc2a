package sandbox

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/internal/peercred"
)

// DropSecrets leaves out every entry that names a token variable of the runtime's or carries one of its
// secrets (the operator, formation and control tokens, whole or inside a longer value) or a peer
// credential of any formation, says which and why without the value, and keeps everything else.
func TestDropSecrets(t *testing.T) {
	const (
		operator  = "mur_operator0123456789abcdef"
		formation = "mur_formation0123456789abcdef"
		control   = "ctl-0123456789"
	)
	secrets := []Secret{
		{What: "the operator token", Value: operator},
		{What: "the formation token", Value: formation},
		{What: "control token ops", Value: control},
		{What: "a short token", Value: "op"},
		{What: "nothing", Value: ""},
	}
	ours := peercred.NewKey(formation, "f").Credential("lead", peercred.Trusted)
	theirs := peercred.NewKey("mur_elsewhere", "g").Credential("worker", peercred.Untrusted)
	for _, tc := range []struct {
		name string
		env  []string
		want []Dropped
	}{
		{"clean", []string{"PATH=/usr/bin:/bin", "HOME=/w", "LANG=C.UTF-8", "MODE=fast"}, nil},
		{"token variable names", []string{"MUR_OPERATOR_TOKEN=x", "MUR_FORMATION_TOKEN=", "MUR_PEER_TOKEN_X=c", "MUR_CONTROL_TOKEN=y", "MUR_MEMBER=m"},
			[]Dropped{
				{Name: "MUR_OPERATOR_TOKEN", Reason: "its name is one of the runtime's token variables (MUR_…TOKEN…)"},
				{Name: "MUR_FORMATION_TOKEN", Reason: "its name is one of the runtime's token variables (MUR_…TOKEN…)"},
				{Name: "MUR_PEER_TOKEN_X", Reason: "its name is one of the runtime's token variables (MUR_…TOKEN…)"},
				{Name: "MUR_CONTROL_TOKEN", Reason: "its name is one of the runtime's token variables (MUR_…TOKEN…)"},
			}},
		{"the operator token", []string{"OP=" + operator, "AUTH=Bearer " + operator}, []Dropped{
			{Name: "OP", Reason: "its value is the operator token"},
			{Name: "AUTH", Reason: "its value holds the operator token"},
		}},
		{"the formation token", []string{"FT=" + formation, "URL=http://x/?t=" + formation + "&y"}, []Dropped{
			{Name: "FT", Reason: "its value is the formation token"},
			{Name: "URL", Reason: "its value holds the formation token"},
		}},
		{"a control token", []string{"CTL=" + control, "CURL_ARGS=-H 'Authorization: Bearer " + control + "'"}, []Dropped{
			{Name: "CTL", Reason: "its value is control token ops"},
			{Name: "CURL_ARGS", Reason: "its value holds control token ops"},
		}},
		{"peer credentials, this formation's and another's", []string{"PEER=" + ours, "OTHER=Bearer " + theirs}, []Dropped{
			{Name: "PEER", Reason: "its value holds a member's peer credential (murp1.…)"},
			{Name: "OTHER", Reason: "its value holds a member's peer credential (murp1.…)"},
		}},
		{"a short secret only whole", []string{"S=op", "HOME=/tmp/TestStop/work", "EMPTY="}, []Dropped{
			{Name: "S", Reason: "its value is a short token"},
		}},
		{"not a credential", []string{"NOTE=murp1.lead.trusted.short"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, dropped := DropSecrets(tc.env, secrets)
			if diff := cmp.Diff(tc.want, dropped); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
			var wantKept []string
			for _, kv := range tc.env {
				name, _, _ := strings.Cut(kv, "=")
				if !droppedName(tc.want, name) {
					wantKept = append(wantKept, kv)
				}
			}
			if diff := cmp.Diff(wantKept, kept); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(kept, SecretFree(tc.env, secrets)); diff != "" {
				t.Errorf("SecretFree differs from DropSecrets (-DropSecrets +SecretFree):\n%s", diff)
			}
			for _, d := range dropped {
				for _, s := range []string{operator, formation, control, ours, theirs} {
					if strings.Contains(d.Reason, s) || strings.Contains(d.Name, s) {
						t.Errorf("%+v shows a secret", d)
					}
				}
			}
		})
	}
}

func droppedName(ds []Dropped, name string) bool {
	for _, d := range ds {
		if d.Name == name {
			return true
		}
	}
	return false
}
