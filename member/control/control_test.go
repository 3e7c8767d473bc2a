package control_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/member/control"
	"github.com/murmur-run/murmur/member/records"
)

// record is one record Apply wrote.
type record struct {
	Type, Task string
	Fields     map[string]any
}

func TestApply(t *testing.T) {
	const setting = "inference.driver"
	for _, tc := range []struct {
		name        string
		listed      []string
		agent       bool
		setting     string
		value       string
		want        control.Change
		wantReason  string // the refusal's reason; "": the change is made
		wantCurrent string
	}{
		{name: "a listed driver switch", listed: []string{setting}, agent: true, setting: setting, value: "smart",
			want: control.Change{Setting: setting, Previous: "fast", Value: "smart"}, wantCurrent: "smart"},
		{name: "nothing listed", agent: true, setting: setting, value: "smart",
			wantReason:  `setting "inference.driver" may not be changed: this capsule's murmur.yaml lists no control.agent_settings`,
			wantCurrent: "fast"},
		{name: "not listed", listed: []string{"other", "more"}, agent: true, setting: setting, value: "smart",
			wantReason:  `setting "inference.driver" may not be changed: control.agent_settings lists other, more`,
			wantCurrent: "fast"},
		{name: "listed, and no setting of this member", listed: []string{"other"}, agent: true, setting: "other", value: "x",
			wantReason: `setting "other" is not one this member can change`, wantCurrent: "fast"},
		{name: "a script member has no driver", listed: []string{setting}, setting: setting, value: "smart",
			wantReason: `setting "inference.driver" is not one this member can change`, wantCurrent: "fast"},
		{name: "the choice's check refuses", listed: []string{setting}, agent: true, setting: setting, value: "nowhere",
			wantReason: `no driver choice "nowhere"; the driver choice is still fast`, wantCurrent: "fast"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			choice := control.NewChoice("fast", inference, declared)
			var recs []record
			cfg := control.Config{Listed: tc.listed, Agent: tc.agent, Driver: choice,
				Record: func(typ records.Type, task string, fields map[string]any) error {
					recs = append(recs, record{string(typ), task, fields})
					return nil
				}}
			got, err := control.Apply(cfg, tc.setting, tc.value, "tok-1")

			var wantRecs []record
			if tc.wantReason == "" {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				wantRecs = []record{{"control_change", "", map[string]any{"principal": "operator", "token_id": "tok-1",
					"setting": tc.setting, "from": "fast", "value": tc.value}}}
			} else {
				if !errors.Is(err, control.ErrRefused) || !strings.HasSuffix(err.Error(), ": "+tc.wantReason) {
					t.Errorf("Apply error %v, want ErrRefused with the reason %q", err, tc.wantReason)
				}
				wantRecs = []record{{"control_refused", "", map[string]any{"principal": "operator", "token_id": "tok-1",
					"setting": tc.setting, "value": tc.value, "reason": tc.wantReason}}}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Change (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantRecs, recs); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if c := choice.Current(); c != tc.wantCurrent {
				t.Errorf("the driver choice is %q, want %q", c, tc.wantCurrent)
			}
		})
	}
}

func TestApplyReturnsTheRecordsError(t *testing.T) {
	full := errors.New("disk full")
	choice := control.NewChoice("fast", inference, declared)
	cfg := control.Config{Listed: []string{"inference.driver"}, Agent: true, Driver: choice,
		Record: func(records.Type, string, map[string]any) error { return full }}
	got, err := control.Apply(cfg, "inference.driver", "smart", "tok-1")
	if !errors.Is(err, full) {
		t.Errorf("Apply error %v, want the record's %v", err, full)
	}
	if want := (control.Change{Setting: "inference.driver", Previous: "fast", Value: "smart"}); got != want {
		t.Errorf("Change %+v, want %+v: the switch was made", got, want)
	}
}
