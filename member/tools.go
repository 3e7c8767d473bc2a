package member

import (
	"fmt"
	"os"
	"slices"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/runtimetools"
)

// stageTools builds the registry of the runtime-provided tools this capsule is granted (SPEC "The
// twelve", "Gated on"): no grant, no tool. The tools of later features join here as they are built.
func (s *Session) stageTools() (*runtimetools.Registry, error) {
	c := s.cfg.Capsule
	var tools []runtimetools.Tool
	if c.IsAgent() {
		shell, err := s.commands.ShellTools(c.Path)
		if err != nil {
			return nil, err
		}
		tools = append(tools, shell...)
		if len(c.Capabilities.Shell.Allow) > 0 && c.Lifecycle.ShellGraceSecs != nil {
			tools = append(tools, &runtimetools.BackgroundCommand{Commands: s.commands, Recorder: s.records})
		}
		tools = append(tools, &runtimetools.SessionStatus{Source: s, Recorder: s.records})
		if slices.Contains(c.Control.AgentSettings, string(ids.SettingInferenceDriver)) {
			tools = append(tools, &runtimetools.SwitchDriver{Control: s, Recorder: s.records})
		}
		if len(s.Callable()) > 0 {
			tools = append(tools, &runtimetools.CallMember{Members: s}, &runtimetools.EndWithoutAnswer{Ender: s})
		}
		if len(s.spawn) > 0 {
			tools = append(tools, &runtimetools.DelegateTask{Delegator: s})
		}
		if c.Capabilities.Plan.Submit {
			tools = append(tools, &runtimetools.SubmitPlan{Runner: s})
		}
		if c.Exports.PeerFiles != "" {
			tools = append(tools, &runtimetools.ShareFile{Sharer: s.files, Recorder: s.records})
		}
		if c.Capabilities.PeerFetch {
			tools = append(tools, &runtimetools.FetchPeerFile{Fetcher: s.files, Recorder: s.records})
		}
		if in := s.art.Installer(); in != nil {
			pulls := s.cfg.Metrics.ArtifactPulls
			tools = append(tools, &runtimetools.PullArtifact{Installer: in, Recorder: s.records,
				Count: func(rt, result string) { pulls.WithLabelValues(rt, result).Inc() }},
				&runtimetools.RemoveArtifact{Installer: in})
		}
	}
	// The export root exists from the start, so the door can serve it and the agent can write into it.
	if root := s.ExportRoot(); root != "" {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return nil, fmt.Errorf("staging exports.peer_files: %w", err)
		}
	}
	return runtimetools.NewRegistry(tools...)
}
