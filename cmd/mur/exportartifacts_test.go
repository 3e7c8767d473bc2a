package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/member/artifact"
)

// The artifacts a capsule declares go into mur export k8s's ConfigMap, placed in the project store
// beside the roster wherever staging found them (the project store or the global store): a formation
// rebuilt from the ConfigMap alone, with no global store, passes mur check, so each copy's digest is
// the one murmur.lock pins. Before the lock pins them the export says so; the compose file, whose mount
// holds the project store but not the global one, names what its containers cannot see.
func TestExportCarriesDeclaredArtifacts(t *testing.T) {
	root, global := t.TempDir(), t.TempDir()
	files := map[string]string{
		"roster.yaml":      "formation: carry\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:7101'}\n",
		"lead/murmur.yaml": "name: lead\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\nhooks: [local/guard]\nskills: [team/style]\n",
		"lead/script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: ok\n",
		".murmur/store/local/guard/1.0.0/murmur.yaml": "name: local/guard\nversion: 1.0.0\nruntime: hook\nimplementation: command\ncommand: [./hook.sh]\nevents: [on-tool-call]\n",
		".murmur/store/local/guard/1.0.0/hook.sh":     "#!/bin/sh\necho '{\"decision\":\"allow\"}'\n",
		".murmur/operator.token":                      "never-exported\n",
	}
	for name, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(global, "team/style/1.0.0"), 0o755)
	os.WriteFile(filepath.Join(global, "team/style/1.0.0/murmur.yaml"), []byte("name: team/style\nversion: 1.0.0\nruntime: skill\nimplementation: text\ntext: SKILL.md\n"), 0o644)
	os.WriteFile(filepath.Join(global, "team/style/1.0.0/SKILL.md"), []byte("Answer in one line.\n"), 0o644)
	env := envOf(map[string]string{"MUR_STORE_DIR": global, "HOME": t.TempDir(), "MUR_FORMATION_TOKEN": "fm", "MUR_OPERATOR_TOKEN": "op"})
	export := func(format string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(context.Background(), []string{"export", format, "--roster", filepath.Join(root, "roster.yaml")}, env, &out, &errb); err != nil {
			t.Fatalf("export %s: %v\n%s", format, err, errb.String())
		}
		return out.String(), errb.String()
	}

	_, warned := export("k8s")
	for _, name := range []string{"local/guard@1.0.0", "team/style@1.0.0"} {
		if !strings.Contains(warned, "does not pin "+name+" yet") {
			t.Errorf("the export before any pin does not say %s is unpinned:\n%s", name, warned)
		}
	}
	// What a first run does: pin what the capsule declares.
	stores := artifact.Stores(root, env, env("HOME"))
	if _, err := artifact.StageDeclared(context.Background(), stores, filepath.Join(root, "lead/murmur.lock"),
		artifact.Declared{Hooks: []string{"local/guard"}, Skills: []string{"team/style"}}, true); err != nil {
		t.Fatal(err)
	}
	manifests, warned := export("k8s")
	if warned != "" {
		t.Errorf("warnings once pinned: %s", warned)
	}
	if strings.Contains(manifests, "never-exported") {
		t.Error("the data directory's token is in the manifests")
	}
	objs := decodeK8s(t, []byte(manifests))
	cm, ss := objs.configMaps["carry-formation"], objs.statefulSets["lead"]
	if cm == nil || ss == nil {
		t.Fatal("no ConfigMap carry-formation or StatefulSet lead")
	}
	// The formation as the pod mounts it: each item of the ConfigMap's volume at its path, in its mode.
	rebuilt := t.TempDir()
	var paths []string
	for _, v := range ss.Spec.Template.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		for _, it := range v.ConfigMap.Items {
			data, ok := cm.Data[it.Key]
			if !ok {
				data = string(cm.BinaryData[it.Key])
			}
			p := filepath.Join(rebuilt, filepath.FromSlash(it.Path))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(data), os.FileMode(*it.Mode)); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, it.Path)
		}
	}
	for _, want := range []string{".murmur/store/local/guard/1.0.0/hook.sh", ".murmur/store/team/style/1.0.0/SKILL.md", "lead/murmur.lock"} {
		if !slices.Contains(paths, want) {
			t.Errorf("the ConfigMap has no %s: %v", want, paths)
		}
	}
	if slices.Contains(paths, "lead/"+artifact.FlockFile) {
		t.Errorf("the ConfigMap carries the lock's flock file: %v", paths)
	}
	var out, errb bytes.Buffer
	bare := envOf(map[string]string{"MUR_STORE_DIR": t.TempDir(), "HOME": t.TempDir()})
	if err := run(context.Background(), []string{"check", "--roster", filepath.Join(rebuilt, "roster.yaml")}, bare, &out, &errb); err != nil {
		t.Errorf("mur check of the formation rebuilt from the ConfigMap: %v\n%s%s", err, out.String(), errb.String())
	}

	_, warned = export("compose")
	if want := "member lead uses team/style@1.0.0 from the global store (" + filepath.Join(global, "team/style/1.0.0") + "), which its container cannot see"; !strings.Contains(warned, want) {
		t.Errorf("compose export's warning:\n%s\nwant it to contain %q", warned, want)
	}
	if strings.Contains(warned, "local/guard") {
		t.Errorf("compose export warns of the project store's artifact:\n%s", warned)
	}
}
