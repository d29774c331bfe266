#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# perms.sh BUCKET: POSIX permissions enforced for different AUTH_SYS users.
#
# Runs as root in the nfsvm guest (cwd = the mount of the tenant root) and
# switches to uids 1000/1001/1002 with setpriv, so the kernel client sends
# those credentials. uid 1000 and 1001 share the supplementary group 2000;
# uid 1002 is in no shared group. Checks owner-only files, group-readable
# files, private and non-writable directories, the sticky bit, chmod/chgrp
# rights and what root may do.
. /host/lib.sh
B=${1:?usage: perms.sh BUCKET}
U0=(1000 1000,2000)     # owner, member of the shared group 2000
U1=(1001 1001,2000)     # other user, member of 2000
U2=(1002 1002)          # outsider

step "mkdir bucket and a sticky shared directory"
mkdir "$B"
cd "$B"
mkdir shared
chmod 1777 shared
eq "$(stat -c %a shared)" 1777 "mode of shared"

step "uid 1000 creates a 0600 file"
as "${U0[@]}" bash -c 'umask 077; echo secret > shared/private'
eq "$(stat -c %u:%g:%a shared/private)" 1000:1000:600 "owner, group and mode of shared/private"
eq "$(as "${U0[@]}" cat shared/private)" secret "owner reads its own 0600 file"

step "uid 1001 cannot read or write the 0600 file"
must_fail_with "Permission denied" as "${U1[@]}" cat shared/private
must_fail_with "Permission denied" as "${U1[@]}" bash -c 'echo x >> shared/private'
must_fail_with "Permission denied" as "${U1[@]}" bash -c ': > shared/private'
must_fail_with "Operation not permitted" as "${U1[@]}" chmod 666 shared/private
must_fail_with "Operation not permitted" as "${U1[@]}" chown 1001 shared/private
drop_caches
must_fail_with "Permission denied" as "${U1[@]}" cat shared/private
eq "$(cat shared/private)" secret "content unchanged"
eq "$(stat -c %a shared/private)" 600 "mode unchanged"

step "sticky directory: uid 1001 cannot remove or rename uid 1000's file"
must_fail_with "Operation not permitted" as "${U1[@]}" rm -f shared/private
must_fail_with "Operation not permitted" as "${U1[@]}" mv shared/private shared/stolen
[ -e shared/private ] || fail "shared/private vanished"

step "group-readable file for the shared group 2000"
as "${U0[@]}" chgrp 2000 shared/private
as "${U0[@]}" chmod 640 shared/private
eq "$(stat -c %u:%g:%a shared/private)" 1000:2000:640 "owner, group and mode after chgrp+chmod"
eq "$(as "${U1[@]}" cat shared/private)" secret "group member 1001 reads the 0640 file"
must_fail_with "Permission denied" as "${U1[@]}" bash -c 'echo x >> shared/private'
must_fail_with "Permission denied" as "${U2[@]}" cat shared/private
# the owner may not give the file to a group it is not in
must_fail_with "Operation not permitted" as "${U0[@]}" chgrp 3000 shared/private
as "${U0[@]}" chmod 660 shared/private
as "${U1[@]}" bash -c 'echo appended-by-1001 >> shared/private'
eq "$(tail -1 shared/private)" appended-by-1001 "group member appends to the 0660 file"
eq "$(stat -c %u shared/private)" 1000 "owner unchanged after a write by another user"

step "private and read-only directories"
as "${U0[@]}" mkdir -m 700 shared/home0
as "${U0[@]}" bash -c 'echo mine > shared/home0/f'
eq "$(stat -c %u:%a shared/home0)" 1000:700 "owner and mode of shared/home0"
must_fail_with "Permission denied" as "${U1[@]}" ls shared/home0
must_fail_with "Permission denied" as "${U1[@]}" cat shared/home0/f
must_fail_with "Permission denied" as "${U1[@]}" touch shared/home0/g
as "${U0[@]}" chmod 755 shared/home0
eq "$(as "${U1[@]}" ls shared/home0)" f "uid 1001 lists the 0755 directory"
must_fail_with "Permission denied" as "${U1[@]}" touch shared/home0/g
must_fail_with "Permission denied" as "${U1[@]}" rm -f shared/home0/f
must_fail_with "Permission denied" as "${U1[@]}" mkdir shared/home0/sub
[ ! -e shared/home0/g ] || fail "uid 1001 created a file in uid 1000's 0755 directory"

step "owner without write permission"
as "${U0[@]}" bash -c 'echo ro > shared/ro; chmod 444 shared/ro'
must_fail_with "Permission denied" as "${U0[@]}" bash -c 'echo x >> shared/ro'
eq "$(as "${U0[@]}" cat shared/ro)" ro "owner reads its 0444 file"

step "execute permission"
as "${U0[@]}" bash -c 'printf "#!/bin/sh\necho ran\n" > shared/prog; chmod 700 shared/prog'
eq "$(as "${U0[@]}" shared/prog)" ran "owner runs its 0700 program"
must_fail_with "Permission denied" as "${U1[@]}" shared/prog
as "${U0[@]}" chmod 755 shared/prog
eq "$(as "${U1[@]}" shared/prog)" ran "uid 1001 runs the 0755 program"

step "root reads and chowns (no root squash on loopback)"
eq "$(head -1 shared/private)" secret "root reads the 0660 file"
chown 1001:1001 shared/home0/f
eq "$(stat -c %u:%g shared/home0/f)" 1001:1001 "owner after chown by root"
eq "$(as "${U1[@]}" cat shared/home0/f)" mine "new owner reads its file"

step "new files take the creator's uid and gid"
as "${U1[@]}" bash -c 'echo by1001 > shared/new1001'
eq "$(stat -c %u:%g shared/new1001)" 1001:1001 "owner of a file created by 1001"
as "${U1[@]}" mkdir shared/dir1001
eq "$(stat -c %u:%g shared/dir1001)" 1001:1001 "owner of a directory created by 1001"
hostcheck "$B" shared/new1001 shared/new1001
workload_ok perms
