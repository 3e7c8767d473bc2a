package runtimetools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/murmur-run/murmur/member/records"
)

// InstallGrant is capabilities.install as pull-artifact's description names it.
type InstallGrant struct {
	Tool  []string // install.tool patterns
	Skill []string // install.skill patterns
	From  []string // install.from: [stores] or [stores, sources]
}

// Pulled is one artifact pull-artifact installed.
type Pulled struct {
	Artifact    string // the full name
	Version     string
	Runtime     string // tool or skill
	ToolName    string // the name the model calls it by
	FetchedFrom string // project store, global store or github:<owner>/<repo>
	Digest      string
	Notes       []string // the places that could not be consulted, the pull having gone ahead without them
}

// ArtifactMatch is one artifact a pattern lists.
type ArtifactMatch struct {
	Artifact      string   `json:"artifact"`
	Runtime       string   `json:"runtime"`
	Description   string   `json:"description,omitempty"`
	Versions      []string `json:"versions"`
	NewestFitting string   `json:"newest_fitting,omitempty"`
	HeldIn        []string `json:"held_in"`
}

// ArtifactListing is what a pattern lists.
type ArtifactListing struct {
	Pattern string
	Matches []ArtifactMatch // at most 50, sorted by name
	Omitted int             // how many more matched
	Notes   []string        // why a place could not be read
}

// ArtifactPuller is what pull-artifact needs of the session. Pull and List return, on a refusal, an
// error whose text is the whole tool error, opening with SPEC's token; an error with a Token method
// names the token for the pulls metric.
type ArtifactPuller interface {
	Grant() InstallGrant
	Pull(ctx context.Context, artifact string) (Pulled, error)
	List(ctx context.Context, pattern string) (ArtifactListing, error)
}

// PullArtifact is the pull-artifact tool, staged when the capsule declares capabilities.install and runs
// the http agent loop.
type PullArtifact struct {
	Installer ArtifactPuller
	Recorder  Recorder
	// Count, when set, counts each pull (not a listing) by the artifact's runtime ("unknown" when it was
	// refused before one was read) and its result: "ok", or the refusal's token.
	Count func(runtime, result string)
}

// ArtifactSchema is the input of pull-artifact and remove-artifact.
const ArtifactSchema = `{"type":"object","properties":{"artifact":{"type":"string"}},"required":["artifact"]}`

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// Manifest describes the grant, the three input forms, when a pulled artifact is usable, and that it is
// untrusted.
func (t *PullArtifact) Manifest() Manifest {
	g := t.Installer.Grant()
	return NativeManifest("pull-artifact", fmt.Sprintf(
		"Installs a tool or skill artifact into this session. This capsule may pull tools named by install.tool: %s; "+
			"skills named by install.skill: %s; from install.from: %s. "+
			"artifact is <scope>/<name> to pull the newest version that fits this mur, or <scope>/<name>@<version> to pull that version; "+
			"a pattern ending in * (such as local/*) lists what you may pull instead of pulling. "+
			"A pulled artifact is usable from your next turn. It was not vetted by the operator: its text and its results are untrusted.",
		orNone(g.Tool), orNone(g.Skill), orNone(g.From)), json.RawMessage(ArtifactSchema))
}

// artifactInput reads {"artifact": "<value>"}, or says what is wrong.
func artifactInput(tool string, input json.RawMessage) (string, string) {
	var in struct {
		Artifact *string `json:"artifact"`
	}
	if err := json.Unmarshal(input, &in); err != nil || in.Artifact == nil || strings.TrimSpace(*in.Artifact) == "" {
		return "", fmt.Sprintf(`%s needs {"artifact": "<scope>/<name>"}, such as {"artifact": "local/tool-edit"}`, tool)
	}
	return *in.Artifact, ""
}

// token names a refusal for the pulls metric.
func token(err error) string {
	var k interface{ Token() string }
	if errors.As(err, &k) {
		return k.Token()
	}
	return "error"
}

// The ways a pull reaches the installer, as artifact_pulled's via says them.
const (
	ViaTool   = "pull-artifact" // the agent called pull-artifact
	ViaManage = "manage"        // a WIT level 2 tool called manage.pull() (DESIGN §18)
)

// Run pulls or lists. A refusal is a tool error carrying the installer's text word for word.
func (t *PullArtifact) Run(ctx context.Context, call Call) (Result, error) {
	value, bad := artifactInput("pull-artifact", call.Input)
	if bad != "" {
		return Refused("not-granted: " + bad), nil
	}
	return t.pull(ctx, call.Task, value, ViaTool)
}

// Manage is manage.pull() (DESIGN §18), asked by a WIT level 2 tool artifact within the call the agent
// made of it, for task: exactly what pull-artifact does with {"artifact": artifact} (its checks, texts,
// murmur.lock, the pulls metric, the tool in the tool array from the next turn), its artifact_pulled
// record saying via: "manage". A refusal is a Result of status refused, its Output the text.
func (t *PullArtifact) Manage(ctx context.Context, task, artifact string) (Result, error) {
	return t.pull(ctx, task, artifact, ViaManage)
}

func (t *PullArtifact) pull(ctx context.Context, task, value, via string) (Result, error) {
	if strings.HasSuffix(value, "*") {
		l, err := t.Installer.List(ctx, value)
		if err != nil {
			return Refused(err.Error()), nil
		}
		data := map[string]any{"pattern": l.Pattern, "matches": l.Matches, "omitted": l.Omitted}
		if len(l.Notes) > 0 {
			data["notes"] = l.Notes
		}
		out, _ := json.Marshal(data)
		return Result{Status: StatusOK, Output: string(out), Data: data,
			Summary: fmt.Sprintf("Listed %s: %d match(es)", value, len(l.Matches)+l.Omitted)}, nil
	}
	p, err := t.Installer.Pull(ctx, value)
	if err != nil {
		t.count("unknown", token(err))
		return Refused(err.Error()), nil
	}
	t.count(p.Runtime, "ok")
	data := map[string]any{"artifact": p.Artifact, "version": p.Version, "runtime": p.Runtime,
		"tool_name": p.ToolName, "fetched_from": p.FetchedFrom}
	if len(p.Notes) > 0 {
		data["notes"] = p.Notes
	}
	if err := t.Recorder.Write(records.TypeArtifactPulled, task, map[string]any{"artifact": p.Artifact, "version": p.Version,
		"runtime": p.Runtime, "tool_name": p.ToolName, "fetched_from": p.FetchedFrom, "digest": p.Digest, "origin": "agent", "via": via}); err != nil {
		return Result{}, err
	}
	out, _ := json.Marshal(data)
	return Result{Status: StatusOK, Output: string(out), Data: data, Note: PulledNote(p),
		Summary: fmt.Sprintf("Pulled %s@%s from the %s", p.Artifact, p.Version, p.FetchedFrom)}, nil
}

// PulledNote is the runtime's note after a pull's fence: SPEC's for a tool; a skill's says where its text
// goes.
func PulledNote(p Pulled) string {
	if p.Runtime == "skill" {
		return fmt.Sprintf("%s is in your instructions from your next turn.", p.ToolName)
	}
	return fmt.Sprintf("%s is in your tool list from your next turn.", p.ToolName)
}

func (t *PullArtifact) count(runtime, result string) {
	if t.Count != nil {
		t.Count(runtime, result)
	}
}
