package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8syaml "sigs.k8s.io/yaml"
)

// k8sObjects are the decoded documents of mur export k8s, by name.
type k8sObjects struct {
	secrets      map[string]*corev1.Secret
	configMaps   map[string]*corev1.ConfigMap
	services     map[string]*corev1.Service
	statefulSets map[string]*appsv1.StatefulSet
}

// decodeK8s decodes every document strictly into its Kubernetes API type: an unknown or duplicated
// field is an error.
func decodeK8s(t *testing.T, data []byte) k8sObjects {
	t.Helper()
	objs := k8sObjects{map[string]*corev1.Secret{}, map[string]*corev1.ConfigMap{}, map[string]*corev1.Service{}, map[string]*appsv1.StatefulSet{}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var n yaml.Node
		if err := dec.Decode(&n); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		doc, err := yaml.Marshal(&n)
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := k8syaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		strict := func(into any) {
			if err := k8syaml.UnmarshalStrict(doc, into); err != nil {
				t.Fatalf("document %d (%s %s) does not decode strictly: %v\n%s", i, head.APIVersion, head.Kind, err, doc)
			}
		}
		switch head.APIVersion + " " + head.Kind {
		case "v1 Secret":
			var o corev1.Secret
			strict(&o)
			objs.secrets[o.Name] = &o
		case "v1 ConfigMap":
			var o corev1.ConfigMap
			strict(&o)
			objs.configMaps[o.Name] = &o
		case "v1 Service":
			var o corev1.Service
			strict(&o)
			objs.services[o.Name] = &o
		case "apps/v1 StatefulSet":
			var o appsv1.StatefulSet
			strict(&o)
			objs.statefulSets[o.Name] = &o
		default:
			t.Fatalf("document %d: unexpected %s %s", i, head.APIVersion, head.Kind)
		}
	}
	return objs
}

func TestExportK8sDecodesIntoTheKubernetesTypes(t *testing.T) {
	// The checked-in manifests leave the Secret to the user, and name it.
	b, err := os.ReadFile("../../deploy/k8s/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkedIn := decodeK8s(t, b)
	if len(checkedIn.secrets) != 0 || len(checkedIn.configMaps) != 1 || len(checkedIn.services) != 2 || len(checkedIn.statefulSets) != 2 {
		t.Errorf("deploy/k8s/hello.yaml: %d secrets, %d config maps, %d services, %d stateful sets", len(checkedIn.secrets), len(checkedIn.configMaps), len(checkedIn.services), len(checkedIn.statefulSets))
	}
	for name, ss := range checkedIn.statefulSets {
		for _, e := range ss.Spec.Template.Spec.Containers[0].Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef.Name != "hello-tokens" {
				t.Errorf("deploy/k8s/hello.yaml: %s takes %s from secret %s", name, e.Name, e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}

	env := envOf(map[string]string{"MUR_FORMATION_TOKEN": "fm-token", "MUR_OPERATOR_TOKEN": "op-token", "MUR_CONTROL_TOKEN": "ctl-token"})
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"export", "k8s", "--roster", filepath.Join(helloDir, "roster.yaml"), "--image", "mur:test"}, env, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if errb.Len() > 0 {
		t.Errorf("warnings: %s", errb.String())
	}
	// The output is stable when the tokens are given.
	var again bytes.Buffer
	run(context.Background(), []string{"export", "k8s", "--roster", filepath.Join(helloDir, "roster.yaml"), "--image", "mur:test"}, env, &again, io.Discard)
	if !bytes.Equal(out.Bytes(), again.Bytes()) {
		t.Error("two exports differ")
	}
	objs := decodeK8s(t, out.Bytes())
	if len(objs.secrets) != 1 || len(objs.configMaps) != 1 || len(objs.services) != 2 || len(objs.statefulSets) != 2 {
		t.Fatalf("objects: %d secrets, %d config maps, %d services, %d stateful sets", len(objs.secrets), len(objs.configMaps), len(objs.services), len(objs.statefulSets))
	}
	if got := objs.secrets["hello-tokens"].StringData; !cmp.Equal(got, map[string]string{"formation-token": "fm-token", "operator-token": "op-token", "control-token": "ctl-token"}) {
		t.Errorf("secret: %v", got)
	}
	cm := objs.configMaps["hello-formation"]
	for _, rel := range []string{"roster.yaml", "lead/murmur.yaml", "lead/script.yaml", "worker/murmur.yaml", "worker/answer.sh"} {
		want, _ := os.ReadFile(filepath.Join(helloDir, rel))
		if got := cm.Data[strings.ReplaceAll(rel, "/", "_")]; got != string(want) {
			t.Errorf("ConfigMap %s differs from the file:\n%s", rel, got)
		}
	}
	for name, port := range map[string]int32{"lead": 7101, "worker": 7102} {
		svc := objs.services[name]
		if svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != port || svc.Spec.Ports[0].TargetPort.StrVal != "door" {
			t.Errorf("service %s: %+v", name, svc)
			continue
		}
		ss := objs.statefulSets[name]
		if ss == nil {
			t.Errorf("no StatefulSet %s", name)
			continue
		}
		if *ss.Spec.Replicas != 1 || ss.Spec.ServiceName != name || !cmp.Equal(ss.Spec.Selector.MatchLabels, ss.Spec.Template.Labels) ||
			!cmp.Equal(ss.Spec.Selector.MatchLabels, svc.Spec.Selector) {
			t.Errorf("StatefulSet %s: replicas %d, service %s, selector %v, pod labels %v, service selector %v", name,
				*ss.Spec.Replicas, ss.Spec.ServiceName, ss.Spec.Selector.MatchLabels, ss.Spec.Template.Labels, svc.Spec.Selector)
		}
		if len(ss.Spec.VolumeClaimTemplates) != 1 || ss.Spec.VolumeClaimTemplates[0].Name != "data" ||
			ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String() != "1Gi" {
			t.Errorf("StatefulSet %s: volume claims %+v", name, ss.Spec.VolumeClaimTemplates)
		}
		pod := ss.Spec.Template.Spec
		if sc := pod.SecurityContext; sc == nil || !*sc.RunAsNonRoot || *sc.RunAsUser != 65532 || *sc.FSGroup != 65532 {
			t.Errorf("StatefulSet %s: pod security context %+v", name, sc)
		}
		c := pod.Containers[0]
		if c.Image != "mur:test" || !cmp.Equal(c.Args, []string{"member", "--roster", "/formation/roster.yaml", "--name", name}) {
			t.Errorf("StatefulSet %s: image %s, args %q", name, c.Image, c.Args)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil {
				env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
				if o := e.ValueFrom.SecretKeyRef.Optional; o != nil && *o {
					env[e.Name] += " (optional)"
				}
			} else {
				env[e.Name] = e.Value
			}
		}
		want := map[string]string{
			"MUR_LISTEN": fmt.Sprintf("0.0.0.0:%d", port), "MUR_DOOR_URLS": "lead=http://lead:7101,worker=http://worker:7102",
			"MUR_DATA_DIR": "/data", "MUR_FORMATION_TOKEN": "secret:hello-tokens/formation-token", "MUR_OPERATOR_TOKEN": "secret:hello-tokens/operator-token",
			"MUR_CONTROL_TOKEN": "secret:hello-tokens/control-token (optional)",
		}
		if diff := cmp.Diff(want, env); diff != "" {
			t.Errorf("StatefulSet %s env (-want +got):\n%s", name, diff)
		}
		if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.Ports[0].ContainerPort != port || c.Ports[0].Name != "door" {
			t.Errorf("StatefulSet %s: probe %+v, ports %+v", name, c.ReadinessProbe, c.Ports)
		}
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		if !cmp.Equal(mounts, map[string]string{"data": "/data", "formation": "/formation", "tmp": "/tmp"}) {
			t.Errorf("StatefulSet %s: mounts %v", name, mounts)
		}
		for _, v := range pod.Volumes {
			if v.ConfigMap == nil {
				continue
			}
			for _, it := range v.ConfigMap.Items {
				if it.Path == "worker/answer.sh" && (it.Mode == nil || *it.Mode != 0o555) {
					t.Errorf("answer.sh is mounted with mode %v, want 0555", it.Mode)
				}
			}
		}
	}
}
