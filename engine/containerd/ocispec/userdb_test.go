package ocispec

import (
	"errors"
	"strings"
	"testing"
)

// TestPlanImageUser resolves a user image's USER from its /etc/passwd
// and /etc/group as runc's callers do (Docker, containerd's WithUser):
// a name or a uid alone through /etc/passwd, its additional groups from
// /etc/group, an explicit group as given; a uid that /etc/passwd lacks is
// itself in group 0; a name that it lacks is ErrUser. e2e's
// TestImageUser holds Docker and containerd to the same for real images.
func TestPlanImageUser(t *testing.T) {
	passwd := "root:x:0:0:root:/root:/bin/sh\n# a comment\n\nnonroot:x:65532:65532::/home/nonroot:/sbin/nologin\nprobe:x:1234:1234::/:/bin/false\nbroken:x:y:z\n"
	group := "root:x:0:root\nwheel:x:10:root,probe\nnonroot:x:65532:\nprobe:x:1234:\nextra:x:2000:probe,nonroot\nbad:x:q:probe\n"
	db := &UserDB{Passwd: []byte(passwd), Group: []byte(group)}
	scratch := &UserDB{}
	// Alpine 3.20's /etc/group.
	alpine := &UserDB{Passwd: []byte("root:x:0:0:root:/root:/bin/sh\n"), Group: []byte("root:x:0:root\nbin:x:1:root,bin,daemon\ndaemon:x:2:root,bin,daemon\n" +
		"sys:x:3:root,bin,adm\nadm:x:4:root,adm,daemon\ntty:x:5:\ndisk:x:6:root,adm\nlp:x:7:lp\nkmem:x:9:\nwheel:x:10:root\nfloppy:x:11:root\n" +
		"mail:x:12:mail\nnews:x:13:news\nuucp:x:14:uucp\ncron:x:16:cron\naudio:x:18:\ncdrom:x:19:\ndialout:x:20:root\nftp:x:21:\nsshd:x:22:\n" +
		"input:x:23:\ntape:x:26:root\nvideo:x:27:root\nnetdev:x:28:\nkvm:x:34:kvm\ngames:x:35:\nshadow:x:42:\nwww-data:x:82:\nusers:x:100:games\n" +
		"ping:x:999:\nnogroup:x:65533:\nnobody:x:65534:\n")}
	root := User{AdditionalGids: []uint32{0}}
	cases := []struct {
		name     string
		spec     string
		db       *UserDB
		want     User
		wantErr  error
		inReason string
		confined bool // the action's process lacks CAP_DAC_OVERRIDE
	}{
		// As containerd's WithImageConfig gives them (WithUser, then
		// WithAdditionalGIDs): the groups that list the user, but the
		// one of its own name, after its own group.
		// for root too, whatever its capabilities.
		{name: "empty: root and the groups that list root (Alpine)", spec: "", db: alpine, confined: true, want: User{AdditionalGids: []uint32{0, 1, 2, 3, 4, 6, 10, 11, 20, 26, 27}}},
		{name: "empty: root and the groups that list root", spec: "", db: db, confined: true, want: User{AdditionalGids: []uint32{0, 10}}},
		{name: "empty, CAP_DAC_OVERRIDE: root and its groups (Alpine)", spec: "", db: alpine, want: User{AdditionalGids: []uint32{0, 1, 2, 3, 4, 6, 10, 11, 20, 26, 27}}},
		{name: "0:0, CAP_DAC_OVERRIDE: root and its groups", spec: "0:0", db: db, want: User{AdditionalGids: []uint32{0, 10}}},
		{name: "empty, no /etc/group", spec: "", db: scratch, want: root},
		{name: "empty, files not read", spec: "", want: root},
		{name: "uid:gid: the groups that list the uid's user", spec: "65532:65532", db: db, want: User{UID: 65532, GID: 65532, AdditionalGids: []uint32{65532, 2000}}},
		{name: "uid:gid, another gid", spec: "1234:5", db: db, want: User{UID: 1234, GID: 5, AdditionalGids: []uint32{5, 10, 2000}}},
		{name: "uid:gid, its group listed", spec: "0:10", db: db, want: User{GID: 10, AdditionalGids: []uint32{10}}},
		{name: "uid:gid, the group of the user's name left out", spec: "7:7", db: &UserDB{Passwd: []byte("u:x:7:7::/:/x\n"), Group: []byte("u:x:8:u\nother:x:9:u\n")},
			want: User{UID: 7, GID: 7, AdditionalGids: []uint32{7, 9}}},
		{name: "uid:gid, a uid not in /etc/passwd", spec: "4242:4242", db: db, want: User{UID: 4242, GID: 4242, AdditionalGids: []uint32{4242}}},
		{name: "uid:gid, files not read", spec: "5:6", want: User{UID: 5, GID: 6, AdditionalGids: []uint32{6}}},
		{name: "a uid alone: its group and groups", spec: "65532", db: db, want: User{UID: 65532, GID: 65532, AdditionalGids: []uint32{65532, 2000}}},
		{name: "a uid alone, no /etc/passwd: group 0", spec: "65532", db: scratch, want: User{UID: 65532, AdditionalGids: []uint32{0}}},
		{name: "a uid not in /etc/passwd: group 0", spec: "4242", db: db, want: User{UID: 4242, AdditionalGids: []uint32{0}}},
		{name: "uid 0 alone, no /etc/passwd: root", spec: "0", db: scratch, want: root},
		{name: "a name", spec: "probe", db: db, want: User{UID: 1234, GID: 1234, AdditionalGids: []uint32{1234, 10, 2000}}},
		{name: "root by name", spec: "root", db: db, want: User{AdditionalGids: []uint32{0, 0, 10}}},
		{name: "uid 0", spec: "0", db: db, want: User{AdditionalGids: []uint32{0, 0, 10}}},
		{name: "a name and a group by name: that group alone", spec: "probe:extra", db: db, want: User{UID: 1234, GID: 2000, AdditionalGids: []uint32{2000}}},
		{name: "a name and a gid not in /etc/group", spec: "probe:3000", db: db, want: User{UID: 1234, GID: 3000, AdditionalGids: []uint32{3000}}},
		{name: "a uid and a group by name", spec: "1000:wheel", db: db, want: User{UID: 1000, GID: 10, AdditionalGids: []uint32{10}}},
		{name: "root:root", spec: "root:root", db: db, want: root},
		{name: "a name not in /etc/passwd", spec: "nobody", db: db, wantErr: ErrUser, inReason: "no user nobody"},
		{name: "a name, no /etc/passwd", spec: "root", db: scratch, wantErr: ErrUser, inReason: "no user root"},
		{name: "a group not in /etc/group", spec: "1000:users", db: db, wantErr: ErrUser, inReason: "no group users"},
		{name: "a uid at runc's limit", spec: "2147483647", db: db, want: User{UID: 2147483647, AdditionalGids: []uint32{0}}},
		{name: "a gid at runc's limit", spec: "probe:2147483647", db: db, want: User{UID: 1234, GID: 2147483647, AdditionalGids: []uint32{2147483647}}},
		{name: "a name and gid 0 not in /etc/group", spec: "probe:0", db: &UserDB{Passwd: []byte(passwd)}, want: User{UID: 1234, AdditionalGids: []uint32{0}}},
		{name: "lines of the fewest fields that parse", spec: "short:few", db: &UserDB{Passwd: []byte("short:x:77:78\n"), Group: []byte("few:x:79\n")},
			want: User{UID: 77, GID: 79, AdditionalGids: []uint32{79}}},
		{name: "a uid beyond runc's limit", spec: "2147483648", db: db, wantErr: ErrUser, inReason: "uid 2147483648"},
		{name: "a gid beyond runc's limit", spec: "probe:2147483648", db: db, wantErr: ErrUser, inReason: "gid 2147483648"},
		{name: "files not read", spec: "probe", wantErr: ErrUser, inReason: "not read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := base(t)
			in.Spec.Process.User = root
			in.UserImage.User, in.UserDB = tc.spec, tc.db
			if tc.confined {
				in.Spec.Process.Rest = Rest{"capabilities": []byte(`{"bounding":["CAP_CHOWN"],"effective":["CAP_CHOWN"],"permitted":["CAP_CHOWN"]}`)}
			}
			out, err := Plan(in)
			if !errors.Is(err, tc.wantErr) || err != nil && (!strings.Contains(err.Error(), tc.inReason) || !strings.Contains(err.Error(), `USER "`+tc.spec+`"`)) {
				t.Fatalf("Plan() error = %v, want %v saying %q and naming the USER", err, tc.wantErr, tc.inReason)
			}
			if err == nil {
				is(t, "user", out.Process.User, tc.want)
			}
		})
	}
}

// TestNeedsUserDB: only a name or a uid alone needs the image's files.
func TestNeedsUserDB(t *testing.T) {
	for spec, want := range map[string]bool{
		"": false, "1000:1000": false, "0:0": false, "2147483648:0": false,
		"65532": true, "0": true, "root": true, "nonroot": true, "1000:users": true, "root:0": true,
	} {
		if got := NeedsUserDB(spec); got != want {
			t.Errorf("NeedsUserDB(%q) = %v, want %v", spec, got, want)
		}
	}
}
