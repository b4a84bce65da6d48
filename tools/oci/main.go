// Command oci writes waitdaemon's release: an OCI image layout whose
// index.json names one image index, with an image per platform of what
// Dockerfile.scratch describes (the static binary, and its entrypoint).
// It never reads the clock: every timestamp is -created, the commit's
// time, so the same commit gives the same index digest. `make oci` runs
// it; it prints the index digest on stdout and each image's sizes on
// stderr.
//
//	go run ./tools/oci -out bin/oci -created 1700000000 \
//	    -binary linux/amd64=bin/waitdaemon-linux-amd64 \
//	    -binary linux/arm64=bin/waitdaemon-linux-arm64
package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/waitdaemon/waitdaemon/tools/ocilayout"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "oci:", err)
		os.Exit(1)
	}
}

// binaries is the repeatable -binary flag: os/arch[/variant]=path.
type binaries []string

func (b *binaries) String() string     { return strings.Join(*b, ",") }
func (b *binaries) Set(s string) error { *b = append(*b, s); return nil }

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("oci", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "the layout's directory, absent or empty")
	dockerfile := fs.String("dockerfile", "Dockerfile.scratch", "the Dockerfile the images follow: FROM scratch, one COPY, an ENTRYPOINT")
	created := fs.String("created", "", "every timestamp, in seconds since 1970 (the commit's: git log -1 --format=%ct)")
	source := fs.String("source", "", "the annotation "+ocilayout.AnnotationSource)
	version := fs.String("version", "", "the annotation "+ocilayout.AnnotationVersion)
	revision := fs.String("revision", "", "the annotation "+ocilayout.AnnotationRevision)
	var bins binaries
	fs.Var(&bins, "binary", "os/arch=path of the file COPY copies, once per platform")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *out == "" {
		return errors.New("-out is required")
	}
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil || secs <= 0 {
		return fmt.Errorf("-created=%q: expected seconds since 1970, like the output of git log -1 --format=%%ct", *created)
	}
	if len(bins) == 0 {
		return errors.New("-binary is required, once per platform")
	}

	f, err := os.Open(*dockerfile)
	if err != nil {
		return err
	}
	df, err := ocilayout.ParseDockerfile(f, *dockerfile)
	f.Close()
	if err != nil {
		return err
	}
	when := time.Unix(secs, 0).UTC()
	spec := ocilayout.Spec{
		Created:    when,
		Path:       df.Path,
		Entrypoint: df.Entrypoint,
		Env:        []string{ocilayout.DefaultPath},
		History:    df.History,
		Annotations: map[string]string{
			ocilayout.AnnotationCreated: ocilayout.Timestamp(when),
		},
	}
	for k, v := range map[string]string{ocilayout.AnnotationSource: *source, ocilayout.AnnotationVersion: *version, ocilayout.AnnotationRevision: *revision} {
		if v != "" {
			spec.Annotations[k] = v
		}
	}
	for _, b := range bins {
		plat, file, ok := strings.Cut(b, "=")
		p, perr := parsePlatform(plat)
		if !ok || perr != nil {
			return fmt.Errorf("-binary=%q: expected os/arch=path, like linux/arm64=bin/waitdaemon-linux-arm64", b)
		}
		content, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if err := checkELF(file, content, p); err != nil {
			return err
		}
		spec.Images = append(spec.Images, ocilayout.Image{Platform: p, File: content})
	}

	w, err := ocilayout.Write(*out, spec)
	if err != nil {
		return err
	}
	for _, img := range w.Images {
		fmt.Fprintf(stderr, "%-12s %s  compressed %d bytes (manifest %d, config %d, layer %d), uncompressed %d bytes (%s %d, config %d)\n",
			img.Platform, img.Manifest.Digest, img.Compressed(), img.Manifest.Size, img.Config.Size, img.Layer.Size,
			img.Uncompressed(), df.Path, img.FileSize, img.Config.Size)
	}
	fmt.Fprintf(stderr, "index        %s  in %s, created %s\n", w.Index.Digest, *out, ocilayout.Timestamp(when))
	fmt.Fprintln(stdout, w.Index.Digest)
	return nil
}

func parsePlatform(s string) (ocilayout.Platform, error) {
	f := strings.Split(s, "/")
	if len(f) < 2 || len(f) > 3 || f[0] == "" || f[1] == "" {
		return ocilayout.Platform{}, fmt.Errorf("platform %q: expected os/arch[/variant]", s)
	}
	p := ocilayout.Platform{OS: f[0], Architecture: f[1]}
	if len(f) == 3 {
		p.Variant = f[2]
	}
	return p, nil
}

// machines maps GOARCH to the ELF machine of its binaries.
var machines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM, "386": elf.EM_386,
	"riscv64": elf.EM_RISCV, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390,
}

// checkELF makes sure a Linux platform's file is a static executable of
// its architecture, so that binaries given for the wrong platforms, or a
// dynamic one that cannot run from scratch, never make an image.
func checkELF(name string, content []byte, p ocilayout.Platform) error {
	if p.OS != "linux" {
		return nil
	}
	f, err := elf.NewFile(bytes.NewReader(content))
	if err != nil {
		return fmt.Errorf("%s for %s: not an ELF executable: %w", name, p, err)
	}
	defer f.Close()
	if m, ok := machines[p.Architecture]; ok && f.Machine != m {
		return fmt.Errorf("%s for %s: built for %s", name, p, f.Machine)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s for %s: dynamically linked; the image is FROM scratch (build it with CGO_ENABLED=0)", name, p)
		}
	}
	return nil
}
