package manifests

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDockerfileBaseImageArg: the build stage's image is the BUILD_IMAGE
// build argument, declared before the first FROM with a default, so that
// a release build pins it by digest (--build-arg
// BUILD_IMAGE=<image>@sha256:<digest>) without editing the file; every
// other FROM is scratch or an earlier stage. No digest is written here:
// one that nobody verified would be worse than the tag.
func TestDockerfileBaseImageArg(t *testing.T) {
	text := string(readFile(t, filepath.Join(repoRoot(t), "Dockerfile")))
	var globalArgs []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(strings.ToUpper(line), "FROM ") {
			break
		}
		if strings.HasPrefix(strings.ToUpper(line), "ARG ") {
			globalArgs = append(globalArgs, strings.TrimSpace(line[len("ARG "):]))
		}
	}
	var def string
	for _, a := range globalArgs {
		if name, value, ok := strings.Cut(a, "="); ok && name == "BUILD_IMAGE" {
			def = value
		}
	}
	if def == "" {
		t.Fatalf("no ARG BUILD_IMAGE=<default> before the first FROM (global ARGs: %q)", globalArgs)
	}
	if strings.Contains(def, "$") {
		t.Errorf("BUILD_IMAGE default %q is not an image reference", def)
	}
	stages := map[string]bool{}
	for _, stage := range parseDockerfile(t, text) {
		from := strings.Fields(stage[0].args)
		if len(from) > 0 && strings.HasPrefix(from[0], "--platform=") {
			from = from[1:]
		}
		if len(from) == 0 {
			t.Fatalf("line %d: FROM without an image", stage[0].line)
		}
		switch image := from[0]; {
		case image == "${BUILD_IMAGE}" || image == "$BUILD_IMAGE":
		case image == "scratch" || stages[image]:
		default:
			t.Errorf("line %d: FROM %s: use ${BUILD_IMAGE} (pinned by digest at build time), scratch or an earlier stage", stage[0].line, image)
		}
		if len(from) == 3 && strings.EqualFold(from[1], "AS") {
			stages[from[2]] = true
		}
	}
}

// dockerInstruction is one instruction of a Dockerfile, continuation lines
// joined.
type dockerInstruction struct {
	cmd, args string
	line      int
}

func parseDockerfile(t *testing.T, text string) [][]dockerInstruction {
	t.Helper()
	var stages [][]dockerInstruction
	var cur strings.Builder
	start := 0
	flush := func() {
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		if s == "" {
			return
		}
		cmd, args, _ := strings.Cut(s, " ")
		in := dockerInstruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("line %d: %s before the first FROM", in.line, in.cmd)
			}
			return
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

// TestDockerfile: the final image is scratch with only the static binary,
// runs as a numeric non-root user, and starts tidal.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, string(readFile(t, filepath.Join(repoRoot(t), "Dockerfile"))))
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a final one", len(stages))
	}
	final := stages[len(stages)-1]
	if from := strings.Fields(final[0].args); len(from) == 0 || from[0] != "scratch" {
		t.Errorf("final stage FROM %q, want scratch", final[0].args)
	}
	var user, entrypoint string
	var binaryCopied bool
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			if strings.HasPrefix(in.args, "--from=") && strings.HasSuffix(in.args, " /usr/local/bin/tidal") {
				binaryCopied = true
			}
		case "RUN":
			t.Errorf("line %d: RUN in the scratch stage (there is no shell)", in.line)
		}
	}
	uid, gid, _ := strings.Cut(user, ":")
	for what, id := range map[string]string{"user": uid, "group": gid} {
		n, err := strconv.Atoi(id)
		if err != nil || n == 0 {
			t.Errorf("USER %q: the %s must be a numeric id other than 0 (runAsNonRoot needs a number)", user, what)
		}
	}
	if uid != "65532" {
		t.Errorf("USER %q: the manifests run as 65532", user)
	}
	var argv []string
	if err := json.Unmarshal([]byte(entrypoint), &argv); err != nil || len(argv) == 0 || argv[0] != "/usr/local/bin/tidal" {
		t.Errorf("ENTRYPOINT %s: want the exec form [\"/usr/local/bin/tidal\"] (%v)", entrypoint, err)
	}
	if !binaryCopied {
		t.Error("the final stage does not COPY the binary from the build stage to /usr/local/bin/tidal")
	}
	var built bool
	for _, stage := range stages[:len(stages)-1] {
		for _, in := range stage {
			if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
				built = true
				if !strings.Contains(in.args, "CGO_ENABLED=0") {
					t.Errorf("line %d: go build without CGO_ENABLED=0: the binary would not be static for scratch", in.line)
				}
				if !strings.Contains(in.args, "./cmd/tidal") {
					t.Errorf("line %d: go build does not build ./cmd/tidal", in.line)
				}
			}
		}
	}
	if !built {
		t.Error("no build stage runs go build")
	}
}
