package setup

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/nofollow"
	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/peerfile"
	"github.com/murmur-run/murmur/runtimetools"
)

// Session is what the runtime-provided tools need of the session: each tool's narrow interface.
type Session interface {
	runtimetools.StatusSource
	runtimetools.MemberCaller
	runtimetools.NoAnswerEnder
	runtimetools.Delegator
	runtimetools.PlanRunner
}

// Tools builds the registry of the runtime-provided tools c is granted (SPEC "The twelve", "Gated on"):
// no grant, no tool. choice is the driver choice switch-driver changes; callable says whether
// roster.yaml lets the member call another; pulled counts a pull-artifact pull (its runtime and
// result). The export root is made here, so the door can serve it and the agent can write into it from
// the start; with a runtime root, the tools' manifests are written into the runtime directory.
func (p *Parts) Tools(c *capsule.Capsule, s Session, choice runtimetools.DriverControl, callable bool, pulled func(runtime, result string)) (*runtimetools.Registry, error) {
	var tools []runtimetools.Tool
	if c.IsAgent() {
		shell, err := p.Commands.ShellTools(c.Path)
		if err != nil {
			return nil, err
		}
		tools = append(tools, shell...)
		if len(c.Capabilities.Shell.Allow) > 0 && c.Lifecycle.ShellGraceSecs != nil {
			tools = append(tools, &runtimetools.BackgroundCommand{Commands: p.Commands, Recorder: p.Records})
		}
		tools = append(tools, &runtimetools.SessionStatus{Source: s, Recorder: p.Records})
		if slices.Contains(c.Control.AgentSettings, string(ids.SettingInferenceDriver)) {
			tools = append(tools, &runtimetools.SwitchDriver{Control: choice, Recorder: p.Records})
		}
		if callable {
			tools = append(tools, &runtimetools.CallMember{Members: s}, &runtimetools.EndWithoutAnswer{Ender: s})
		}
		if len(p.Spawn) > 0 {
			tools = append(tools, &runtimetools.DelegateTask{Delegator: s})
		}
		if c.Capabilities.Plan.Submit {
			tools = append(tools, &runtimetools.SubmitPlan{Runner: s})
		}
		if c.Exports.PeerFiles != "" {
			tools = append(tools, &runtimetools.ShareFile{Sharer: p.Files, Recorder: p.Records})
		}
		if c.Capabilities.PeerFetch {
			tools = append(tools, &runtimetools.FetchPeerFile{Fetcher: p.Files, Recorder: p.Records})
		}
		if in := p.Art.Installer(); in != nil {
			tools = append(tools, &runtimetools.PullArtifact{Installer: in, Recorder: p.Records, Count: pulled},
				&runtimetools.RemoveArtifact{Installer: in})
		}
	}
	if root := p.Files.ExportRoot(); !root.IsZero() {
		if err := makeExportRoot(root); err != nil {
			return nil, err
		}
	}
	reg, err := runtimetools.NewRegistry(tools...)
	if err != nil || !p.manifests {
		return reg, err
	}
	if err := p.Art.WriteManifests(p.RuntimeDir, reg.Manifests()); err != nil {
		return nil, fmt.Errorf("member %s: %w", p.member, err)
	}
	return reg, nil
}

// makeExportRoot makes exports.peer_files below the workdir, through no symbolic link. One that a
// command of an earlier session left as a link is left alone, so the member starts: share-file and the
// door refuse it, saying how to make it a directory again.
func makeExportRoot(root peerfile.Root) error {
	if err := os.MkdirAll(root.Workdir, 0o700); err != nil {
		return fmt.Errorf("staging exports.peer_files: %w", err)
	}
	wd, err := nofollow.Open(root.Workdir)
	if err != nil {
		return fmt.Errorf("staging exports.peer_files: %w", err)
	}
	defer wd.Close()
	if err := wd.MkdirAll(root.Dir, 0o700); err != nil && !errors.Is(err, nofollow.ErrSymlink) {
		return fmt.Errorf("staging exports.peer_files: %w", err)
	}
	return nil
}
