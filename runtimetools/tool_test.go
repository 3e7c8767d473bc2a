package runtimetools

import (
	"context"
	"strings"
	"testing"
)

type fakeTool struct{ name string }

func (f fakeTool) Manifest() Manifest {
	return NativeManifest(f.name, "d", []byte(`{"type":"object"}`))
}
func (f fakeTool) Run(context.Context, Call) (Result, error) {
	return Result{Status: StatusOK, Output: f.name}, nil
}

func TestRegistryKeepsOrderAndRefusesDuplicates(t *testing.T) {
	r, err := NewRegistry(fakeTool{"b"}, fakeTool{"a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Names(), ","); got != "b,a" {
		t.Errorf("Names = %q, want b,a", got)
	}
	m := r.Manifests()[0]
	if m.Version != "0.0.0" || m.Runtime != "tool" || m.Implementation != "native" {
		t.Errorf("manifest = %+v, want version 0.0.0, runtime tool, implementation native", m)
	}
	if _, ok := r.Lookup("c"); ok {
		t.Error("Lookup found a tool that was never staged")
	}
	if _, err := NewRegistry(fakeTool{"a"}, fakeTool{"a"}); err == nil {
		t.Error("NewRegistry accepted two tools named a")
	}
}

func TestUnstagedNamesTheMissingDeclaration(t *testing.T) {
	for _, tc := range []struct{ tool, want string }{
		{"delegate-task", "capabilities.spawn.allow"},
		{"share-file", "exports.peer_files"},
		{"fetch-peer-file", "capabilities.peer_fetch"},
		{"submit-plan", "capabilities.plan.submit"},
		{"switch-driver", "control.agent_settings: [inference.driver]"},
		{"call-member", "reach rule in roster.yaml"},
		{"pull-artifact", "capabilities.install"},
		{"background-command", "lifecycle.shell_grace_secs"},
		{"expr", "capabilities.shell.allow"},
	} {
		if got := Unstaged(tc.tool, []string{"z", "y"}); !strings.Contains(got, tc.want) || strings.Contains(got, "this build") {
			t.Errorf("Unstaged(%q) = %q, want it to name %q", tc.tool, got, tc.want)
		}
	}
	if got := Unstaged("nope", []string{"z", "y"}); !strings.Contains(got, "Tools you can call: y, z.") {
		t.Errorf("Unstaged lists %q", got)
	}
}

func TestReserved(t *testing.T) {
	for name, want := range map[string]bool{
		"murmur/delegate-task": true, "ana/pull-artifact": true, "session-status": true,
		"local/bash": false, "bash": false, "x/call-member@1.0.0": true, "local/delegate": false,
	} {
		if got := Reserved(name); got != want {
			t.Errorf("Reserved(%q) = %v, want %v", name, got, want)
		}
	}
	if n := len(Gates()); n != 11 {
		t.Errorf("%d gates, want the eleven of SPEC", n)
	}
}
