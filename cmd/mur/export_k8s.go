package main

import (
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
)

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// k8sName turns s into a DNS-1123 label.
func k8sName(s string) string {
	s = strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if s == "" {
		s = "formation"
	}
	if len(s) > 50 {
		s = strings.TrimRight(s[:50], "-")
	}
	return s
}

// formationFile is one file a member's container needs: the roster or a file of a capsule.
type formationFile struct {
	rel  string // slash-separated, relative to the layout's root
	data []byte
	exec bool
}

// formationFiles reads the roster and every file under each capsule directory, skipping data
// directories (.murmur) and .git, and the files of the artifacts the capsules declare, placed in the
// project store beside the roster (wherever staging found them), in path order.
func formationFiles(l *layout, used []usedArtifact) ([]formationFile, error) {
	seen := map[string]bool{}
	var out []formationFile
	var addAs func(rel, path string) error
	add := func(path string) error {
		rel, err := filepath.Rel(l.root, path)
		if err != nil {
			return err
		}
		return addAs(filepath.ToSlash(rel), path)
	}
	addAs = func(rel, path string) error {
		if seen[rel] {
			return nil
		}
		seen[rel] = true
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out = append(out, formationFile{rel: rel, data: data, exec: fi.Mode().Perm()&0o111 != 0})
		return nil
	}
	if err := add(l.r.Path); err != nil {
		return nil, err
	}
	for _, m := range l.r.Members {
		err := filepath.WalkDir(m.Capsule, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != m.Capsule && (d.Name() == ".murmur" || d.Name() == ".git") {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || d.Name() == artifact.FlockFile {
				return nil
			}
			return add(path)
		})
		if err != nil {
			return nil, fmt.Errorf("reading capsule of member %s: %w", m.Name, err)
		}
	}
	for _, u := range used {
		dir := l.inProjectStore(u.a)
		if err := artifactFiles(u.a, func(rel, path string) error { return addAs(dir+"/"+rel, path) }); err != nil {
			return nil, fmt.Errorf("reading artifact %s of member %s: %w", u.a.Ref(), u.member, err)
		}
	}
	slices.SortFunc(out, func(a, b formationFile) int { return strings.Compare(a.rel, b.rel) })
	return out, nil
}

// k8sNames are the names the manifests of one formation share.
type k8sNames struct {
	formation string // the formation's name as a DNS label: the namespace the header suggests
	secret    string // the Secret with the tokens
	files     string // the ConfigMap with the roster and the capsules
}

// newK8sNames names the objects of the formation called formation in roster.yaml.
func newK8sNames(formation string) k8sNames {
	f := k8sName(formation)
	return k8sNames{formation: f, secret: f + "-tokens", files: f + "-formation"}
}

// labels are the labels of every object of the formation, then the pairs of extra; a fresh node each
// call.
func (n k8sNames) labels(extra ...any) *yaml.Node {
	return ymap(append([]any{"app.kubernetes.io/name", "mur", "app.kubernetes.io/part-of", n.formation}, extra...)...)
}

// memberLabels select member's pods: the formation's labels and murmur.run/member.
func (n k8sNames) memberLabels(member string) *yaml.Node {
	return n.labels("murmur.run/member", member)
}

// k8sYAML is the Kubernetes manifests of l: a Secret with the tokens (unless withSecret is false), a
// ConfigMap with the formation's files, and per member a Service and a StatefulSet.
func k8sYAML(l *layout, used []usedArtifact, outDir, outName, image string, withSecret bool, getenv func(string) string) ([]byte, error) {
	names := newK8sNames(l.r.Formation)
	header := k8sHeader(l, names, k8sCommand(l, outDir, outName, image, withSecret), outName, withSecret)
	var docs []*yaml.Node
	if withSecret {
		docs = append(docs, k8sSecret(names, getenv))
	}
	cm, items, err := k8sConfigMap(l, names, used)
	if err != nil {
		return nil, err
	}
	docs = append(docs, cm)
	for _, m := range l.r.Members {
		header = append(header, k8sMemberNote(m)...)
		docs = append(docs, k8sService(names, m.Name, l.ports[m.Name]), k8sStatefulSet(l, names, m, image, items))
	}
	return encodeYAML(header, docs...)
}

// k8sCommand is the mur export k8s command line that writes these manifests again, from outDir.
func k8sCommand(l *layout, outDir, outName, image string, withSecret bool) string {
	cmdline := "mur export k8s --roster " + strings.TrimPrefix(relSlash(outDir, l.r.Path), "./")
	if image != "mur" {
		cmdline += " --image " + image
	}
	if !withSecret {
		cmdline += " --secret=false"
	}
	if outName != "FILE" {
		cmdline += " --out " + outName
	}
	return cmdline
}

// k8sHeader is the opening of the manifests' header: what they hold, the command that wrote them, and
// how to apply them, with the Secret or without it.
func k8sHeader(l *layout, names k8sNames, cmdline, outName string, withSecret bool) []string {
	r := l.r
	header := []string{
		fmt.Sprintf("Kubernetes manifests for the %s formation: per member a Service and a StatefulSet (one pod, a", r.Formation),
		"volume claim for /data); a ConfigMap with the roster and the capsules, mounted read-only at " + formationMount + ".",
	}
	if slices.ContainsFunc(r.Members, func(m roster.Member) bool { return m.ReplicaCount() > 1 }) {
		header = wrapWords(fmt.Sprintf("Kubernetes manifests for the %s formation: per member a Service and a StatefulSet (a pod per "+
			"replica, each with a volume claim for /data); a ConfigMap with the roster and the capsules, mounted read-only at %s.", r.Formation, formationMount))
	}
	header = append(header,
		"Members reach each other at http://MEMBER:PORT. Generated in this file's directory by",
		"  "+cmdline)
	formation := names.formation
	if withSecret {
		header = append(header,
			"with the Secret "+names.secret+": MUR_FORMATION_TOKEN, MUR_OPERATOR_TOKEN and MUR_CONTROL_TOKEN (the control",
			"surface's, POST /control) from the environment, or fresh",
			"tokens. Keep this file out of version control. Apply into a namespace of the formation's own:",
			"  kubectl create namespace "+formation,
			"  kubectl -n "+formation+" apply -f "+outName)
	} else {
		header = append(header,
			"without the Secret "+names.secret+" that holds the tokens: create it, then apply this file, in a",
			"namespace of the formation's own:",
			"  kubectl create namespace "+formation,
			"  kubectl -n "+formation+" create secret generic "+names.secret+" \\",
			"    --from-literal=formation-token=$(openssl rand -hex 32) --from-literal=operator-token=$(openssl rand -hex 32) \\",
			"    --from-literal=control-token=$(openssl rand -hex 32)    # optional: opens the control surface, POST /control",
			"  kubectl -n "+formation+" apply -f "+outName)
	}
	return append(header,
		fmt.Sprintf("  kubectl -n %s port-forward svc/%s %d    # then the curl lines of docs/door.md, on 127.0.0.1", formation, l.entry, l.ports[l.entry]),
		"")
}

// k8sMemberNote is what the header says of member m's task store and replicas: the Secret with its
// store's password to create, and the database its tasks are in, which the manifests do not create.
func k8sMemberNote(m roster.Member) []string {
	var note []string
	if _, ok := storePasswordVar(m); ok {
		note = append(note, fmt.Sprintf("%s's task store is on PostgreSQL: create the Secret %s-store with its password under the key password,", m.Name, m.Name),
			fmt.Sprintf("  kubectl create secret generic %s-store --from-literal=password=…", m.Name))
	}
	switch n := m.ReplicaCount(); {
	case n > 1:
		note = append(note, wrapWords(fmt.Sprintf("%s runs as %d pods, %s-0 to %s-%d, behind the one Service %s; each names its replica "+
			"by its pod name, and they share the member's tasks through %s, which these manifests do not create.",
			m.Name, n, m.Name, m.Name, n-1, m.Name, storeDatabase(m.Store)))...)
	case m.Store != "":
		note = append(note, wrapWords(fmt.Sprintf("%s's tasks are in %s, which these manifests do not create.", m.Name, storeDatabase(m.Store)))...)
	}
	return note
}

// k8sSecret is the Secret with the tokens: each from the environment, or fresh.
func k8sSecret(names k8sNames, getenv func(string) string) *yaml.Node {
	token := func(env string) string {
		if v := strings.TrimSpace(getenv(env)); v != "" {
			return v
		}
		return server.NewToken()
	}
	return ymap(
		"apiVersion", "v1",
		"kind", "Secret",
		"metadata", ymap("name", names.secret, "labels", names.labels()),
		"type", "Opaque",
		"stringData", ymap(
			"formation-token", token("MUR_FORMATION_TOKEN"),
			"operator-token", token("MUR_OPERATOR_TOKEN"),
			"control-token", token("MUR_CONTROL_TOKEN"),
		),
	)
}

// k8sConfigMap is the ConfigMap with the formation's files (text in data, the rest in binaryData), and
// the items that mount each one at its path with its mode.
func k8sConfigMap(l *layout, names k8sNames, used []usedArtifact) (*yaml.Node, []any, error) {
	files, err := formationFiles(l, used)
	if err != nil {
		return nil, nil, err
	}
	data, binary := ymap(), ymap()
	var items []any
	size := 0
	keys := map[string]bool{}
	for _, f := range files {
		size += len(f.data)
		key := strings.ReplaceAll(f.rel, "/", "_")
		for i := 2; keys[key]; i++ {
			key = fmt.Sprintf("%s_%d", strings.ReplaceAll(f.rel, "/", "_"), i)
		}
		keys[key] = true
		if utf8.Valid(f.data) {
			data.Content = append(data.Content, ynode(key), yliteral(string(f.data)))
		} else {
			binary.Content = append(binary.Content, ynode(key), ynode(base64.StdEncoding.EncodeToString(f.data)))
		}
		mode := 0o444
		if f.exec {
			mode = 0o555
		}
		modeNode := ynode(mode)
		modeNode.LineComment = fmt.Sprintf("0%o", mode)
		items = append(items, ymap("key", key, "path", f.rel, "mode", modeNode))
	}
	if size > maxConfigMap {
		return nil, nil, fmt.Errorf("the roster and capsules of %s hold %d KiB, more than a ConfigMap can (1 MiB): build an image FROM mur with them in it instead", l.r.Path, size>>10)
	}
	cm := ymap(
		"apiVersion", "v1",
		"kind", "ConfigMap",
		"metadata", ymap("name", names.files, "labels", names.labels()),
	)
	if len(data.Content) > 0 {
		cm.Content = append(cm.Content, ynode("data"), data)
	}
	if len(binary.Content) > 0 {
		cm.Content = append(cm.Content, ynode("binaryData"), binary)
	}
	return cm, items, nil
}

// k8sService is the Service named after a member, in front of its pods' doors.
func k8sService(names k8sNames, member string, port int) *yaml.Node {
	return ymap(
		"apiVersion", "v1",
		"kind", "Service",
		"metadata", ymap("name", member, "labels", names.memberLabels(member)),
		"spec", ymap(
			"selector", names.memberLabels(member),
			"ports", yseq(ymap("name", "door", "port", port, "targetPort", "door")),
		),
	)
}

// k8sStatefulSet is member m's StatefulSet: a pod per replica running mur member, each with a volume
// claim for its data and the formation's files from the ConfigMap (items) mounted read-only.
func k8sStatefulSet(l *layout, names k8sNames, m roster.Member, image string, items []any) *yaml.Node {
	port := l.ports[m.Name]
	spec := ymap("serviceName", m.Name, "replicas", m.ReplicaCount())
	if m.ReplicaCount() > 1 {
		// A pod's name (and so its replica's, mur member's default) stays with its ordinal across
		// restarts; the replicas need not wait for each other to start.
		spec.Content = append(spec.Content, ynode("podManagementPolicy"), ynode("Parallel"))
	}
	return ymap(
		"apiVersion", "apps/v1",
		"kind", "StatefulSet",
		"metadata", ymap("name", m.Name, "labels", names.memberLabels(m.Name)),
		"spec", yappend(spec,
			"selector", ymap("matchLabels", names.memberLabels(m.Name)),
			"template", ymap(
				"metadata", ymap(
					"labels", names.memberLabels(m.Name),
					"annotations", ymap(
						"prometheus.io/scrape", yquoted("true"),
						"prometheus.io/port", yquoted(strconv.Itoa(port)),
						"prometheus.io/path", "/metrics",
					),
				),
				"spec", ymap(
					"securityContext", ymap(
						"runAsNonRoot", true,
						"runAsUser", containerUID,
						"runAsGroup", containerUID,
						"fsGroup", containerUID,
					),
					"terminationGracePeriodSeconds", 20,
					"containers", yseq(k8sContainer(l, names, m, image)),
					"volumes", yseq(
						ymap("name", "formation", "configMap", ymap("name", names.files, "items", yseq(items...))),
						ymap("name", "tmp", "emptyDir", ymap()),
					),
				),
			),
			"volumeClaimTemplates", yseq(ymap(
				"metadata", ymap("name", "data"),
				"spec", ymap(
					"accessModes", yflow("ReadWriteOnce"),
					"resources", ymap("requests", ymap("storage", "1Gi")),
				),
			)),
		),
	)
}

// k8sContainer is the container of member m's pods: mur member with its environment (the tokens from
// the Secret), its door, its probes and a locked-down security context.
func k8sContainer(l *layout, names k8sNames, m roster.Member, image string) *yaml.Node {
	port := l.ports[m.Name]
	secretEnv := func(name, key string) *yaml.Node {
		return ymap("name", name, "valueFrom", ymap("secretKeyRef", ymap("name", names.secret, "key", key)))
	}
	// The control token is optional: a Secret without it starts the members without a control surface.
	optionalSecretEnv := func(name, key string) *yaml.Node {
		return ymap("name", name, "valueFrom", ymap("secretKeyRef", ymap("name", names.secret, "key", key, "optional", true)))
	}
	env := yseq(
		ymap("name", "MUR_LISTEN", "value", fmt.Sprintf("0.0.0.0:%d", port)),
		ymap("name", "MUR_DOOR_URLS", "value", l.doorURLs),
		ymap("name", "MUR_DATA_DIR", "value", dataMount),
		secretEnv("MUR_FORMATION_TOKEN", "formation-token"),
		secretEnv("MUR_OPERATOR_TOKEN", "operator-token"),
		optionalSecretEnv("MUR_CONTROL_TOKEN", "control-token"),
	)
	if name, ok := storePasswordVar(m); ok {
		// The store's password from a Secret of the operator's own, never from this file.
		env.Content = append(env.Content, ymap("name", name, "valueFrom",
			ymap("secretKeyRef", ymap("name", m.Name+"-store", "key", "password"))))
	}
	return ymap(
		"name", "mur",
		"image", image,
		"imagePullPolicy", "IfNotPresent",
		"args", yflow("member", "--roster", l.rosterIn, "--name", m.Name),
		"env", env,
		"ports", yseq(ymap("name", "door", "containerPort", port)),
		"readinessProbe", ymap("httpGet", ymap("path", "/readyz", "port", "door"), "periodSeconds", 5),
		"livenessProbe", ymap("httpGet", ymap("path", "/healthz", "port", "door"), "periodSeconds", 10, "failureThreshold", 6),
		"securityContext", ymap(
			"allowPrivilegeEscalation", false,
			"readOnlyRootFilesystem", true,
			"capabilities", ymap("drop", yflow("ALL")),
		),
		"volumeMounts", yseq(
			ymap("name", "data", "mountPath", dataMount),
			ymap("name", "formation", "mountPath", formationMount, "readOnly", true),
			ymap("name", "tmp", "mountPath", "/tmp"),
		),
	)
}
