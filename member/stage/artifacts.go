package stage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/artifact/wasm"
	"github.com/murmur-run/murmur/member/artifact/wit"
	"github.com/murmur-run/murmur/member/capsule"
)

// CodeInstallProcess is a capsule granting capabilities.install under transport: process: SPEC refuses
// it at load, because the harness owns its tool list.
const CodeInstallProcess = "E-CAP-014"

// declaredOf returns what c's murmur.yaml declares.
func declaredOf(c *capsule.Capsule) artifact.Declared {
	return artifact.Declared{Tools: c.Tools, Skills: c.Skills, Hooks: c.Hooks}
}

// artifactStores returns the stores of a capsule in the project in projectDir (the roster's directory,
// or the capsule's outside a formation).
func artifactStores(projectDir string, getenv func(string) string) []artifact.Store {
	return artifact.Stores(projectDir, getenv, getenv("HOME"))
}

// artifactFindings checks c's declared artifacts against its stores and murmur.lock, writing nothing:
// E-CAP-013 for a reserved tool name before anything is read, then E-ART-001/002/003 and
// E-WIT-LEVEL-001; and E-CAP-014 for capabilities.install under transport: process.
func artifactFindings(c *capsule.Capsule, memberName, projectDir string, getenv func(string) string) []Finding {
	var out []Finding
	if i := c.Capabilities.Install; c.Transport == capsule.TransportProcess && len(i.Tool)+len(i.Skill)+len(i.From) > 0 {
		out = append(out, Finding{Code: CodeInstallProcess, Member: memberName, Message: fmt.Sprintf(
			"%s: capabilities.install is declared under transport: process, where the harness owns its tool list, so pull-artifact and remove-artifact cannot exist; remove capabilities.install, or use transport: http", c.Path)})
	}
	if i := c.Capabilities.Install; len(i.Tool)+len(i.Skill)+len(i.From) > 0 {
		if _, err := artifact.NewGrant(i.Tool, i.Skill, i.From); err != nil {
			for _, e := range splitJoined(err) {
				out = append(out, Finding{Code: CodeCapsuleInvalid, Member: memberName, Message: fmt.Sprintf("%s: %v", c.Path, e)})
			}
		}
	}
	arts, err := artifact.StageDeclared(context.Background(), artifactStores(projectDir, getenv), artifact.LockPath(c.Dir), declaredOf(c), false)
	out = append(out, hostFindings(c, memberName, arts)...)
	for _, e := range splitJoined(err) {
		if e == nil {
			continue
		}
		code := artifact.CodeDeclared
		if de, ok := e.(*artifact.DeclaredError); ok {
			code = de.Code
			out = append(out, Finding{Code: code, Member: memberName, Message: fmt.Sprintf("%s: %s", c.Path, trimCodePrefix(de.Error(), code))})
			continue
		}
		out = append(out, Finding{Code: code, Member: memberName, Message: fmt.Sprintf("%s: %v", c.Path, e)})
	}
	return out
}

func trimCodePrefix(s, code string) string {
	if len(s) > len(code)+2 && s[:len(code)+2] == code+": " {
		return s[len(code)+2:]
	}
	return s
}

// CapsuleDir stages the capsule in dir alone, outside a formation, without starting anything: what
// mur check --capsule prints. Its project store is beside the capsule.
func CapsuleDir(dir string, getenv func(string) string) (*capsule.Capsule, []Finding) {
	c, err := capsule.Load(dir)
	if err != nil {
		var out []Finding
		for _, e := range splitJoined(err) {
			out = append(out, Finding{Code: CodeCapsuleInvalid, Message: e.Error()})
		}
		return nil, out
	}
	out := Capsule(c, "", getenv)
	out = append(out, artifactFindings(c, "", c.Dir, getenv)...)
	return c, append(out, spawnFindings(c, "", c.Dir, getenv)...)
}

// CodeHookInference is a WIT level 2 hook that may call run_inference (its module imports it, or a
// command hook declares level 2) in a capsule without capabilities.hooks.inference: its calls are refused.
const CodeHookInference = "W-HOOK-001"

// hostFindings checks what the declared WebAssembly artifacts import of the host module against their
// role and WIT level (E-ART-001, as staging refuses them), and warns of a level-2 hook whose
// run_inference calls the capsule does not grant (W-HOOK-001).
func hostFindings(c *capsule.Capsule, memberName string, arts []*artifact.Artifact) []Finding {
	var out []Finding
	for _, a := range arts {
		m := a.Manifest
		imports := []string(nil)
		if m.Implementation == artifact.ImplWASM {
			// A module that does not decode is staging's to refuse, when it compiles it; mur check reads
			// only what it imports.
			code, err := os.ReadFile(filepath.Join(a.Dir, filepath.FromSlash(m.Module)))
			if err == nil {
				imports, err = wasm.HostImports(context.Background(), code)
			}
			if err == nil {
				if err := m.CheckHostImports(imports); err != nil {
					out = append(out, Finding{Code: artifact.CodeDeclared, Member: memberName, Message: fmt.Sprintf("%s: %s: %v", c.Path, a.Ref(), err)})
					continue
				}
			}
		}
		if m.Runtime != artifact.RuntimeHook || c.Capabilities.Hooks.Inference {
			continue
		}
		switch {
		case slices.Contains(imports, wit.FnRunInference):
			out = append(out, Finding{Code: CodeHookInference, Member: memberName, Message: fmt.Sprintf(
				"%s: the hook %s imports %s.%s, but capabilities.hooks.inference is not true, so each of its calls is refused not-granted:; set capabilities.hooks.inference: true to let it ask a model",
				c.Path, a.Ref(), wit.Module, wit.FnRunInference)})
		case m.Implementation == artifact.ImplCommand && m.WITLevel >= wit.Level:
			out = append(out, Finding{Code: CodeHookInference, Member: memberName, Message: fmt.Sprintf(
				"%s: the command hook %s is WIT level %d, so it may call run_inference, but capabilities.hooks.inference is not true, so each of its calls is refused not-granted:; set capabilities.hooks.inference: true to let it ask a model",
				c.Path, a.Ref(), m.WITLevel)})
		}
	}
	return out
}
