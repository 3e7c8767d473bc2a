package runtimetools

import (
	"context"
	"encoding/json"
	"fmt"
)

// Removed is what remove-artifact did.
type Removed struct {
	Artifact string // the full name, or the value given when nothing was installed under it
	Removed  bool
	ToolName string
	Runtime  string // tool or skill, when removed
}

// ArtifactRemover is what remove-artifact needs of the session. On a refusal Remove returns an error
// whose text is the whole tool error, opening with SPEC's token.
type ArtifactRemover interface {
	Remove(ctx context.Context, artifact string) (Removed, error)
}

// RemoveArtifact is the remove-artifact tool, staged with the same grant as pull-artifact.
type RemoveArtifact struct {
	Installer ArtifactRemover
}

// Manifest describes the input and what a removal does.
func (t *RemoveArtifact) Manifest() Manifest {
	return NativeManifest("remove-artifact",
		"Takes out an artifact this session pulled with pull-artifact, named by its full name (<scope>/<name>) or its tool name. "+
			"It is gone from your tool list from your next turn, and a later call to it is refused, in this turn too. "+
			"Artifacts murmur.yaml declares, the operator's pins, hooks and drivers are not removable.",
		json.RawMessage(ArtifactSchema))
}

// Run removes, reports nothing installed under the name, or refuses.
func (t *RemoveArtifact) Run(ctx context.Context, call Call) (Result, error) {
	value, bad := artifactInput("remove-artifact", call.Input)
	if bad != "" {
		return Refused(bad), nil
	}
	r, err := t.Installer.Remove(ctx, value)
	if err != nil {
		return Refused(err.Error()), nil
	}
	data := map[string]any{"artifact": r.Artifact, "removed": r.Removed}
	out, _ := json.Marshal(data)
	if !r.Removed {
		return Result{Status: StatusOK, Output: string(out), Data: data, Summary: "Removed nothing: " + r.Artifact + " is not installed"}, nil
	}
	return Result{Status: StatusOK, Output: string(out), Data: data, Note: RemovedNote(r), Summary: "Removed " + r.Artifact}, nil
}

// RemovedNote is the runtime's note after a removal's fence: SPEC's for a tool; a skill's says its text
// leaves the instructions.
func RemovedNote(r Removed) string {
	if r.Runtime == "skill" {
		return fmt.Sprintf("%s is gone from your instructions from your next turn.", r.ToolName)
	}
	return fmt.Sprintf("%s is gone from your tool list from your next turn; a call to it is refused.", r.ToolName)
}

// RemovedCall is the refusal of a call to a tool remove-artifact took out of the session, also a call
// listed after the removal in the same turn (SPEC "In-flight calls").
func RemovedCall(tool string) string {
	return fmt.Sprintf("tool '%s' was removed from this session; it can no longer be called", tool)
}
