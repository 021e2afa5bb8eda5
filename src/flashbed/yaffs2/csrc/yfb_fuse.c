// SPDX-License-Identifier: GPL-2.0
/* flashbed-yaffs2: YAFFS2 (its core and direct interface, built from Debian's
 * u-boot source) on raw NAND, served through FUSE.
 *
 *   flashbed-yaffs2 (--mtd /dev/mtdN | --file PATH --geometry PAGE:OOB:PAGES:BLOCKS [--faults LIST])
 *                   [--stats FILE] [--log FILE] [--pidfile FILE] [--no-checkpoint] [--foreground]
 *                   MOUNTPOINT
 *
 * yaffs_mount runs before FUSE starts and is timed on its own; stdout and --stats
 * get one JSON line then (mount time, checkpoint restored or scan) and one at exit
 * (yaffs_unmount time, which writes the checkpoint, and NAND counters). The
 * daemon exits when the FUSE mount goes away (umount) from its own mount
 * namespace; YAFFS2 is unmounted then, so whoever unmounts waits for the
 * --pidfile process to end. A background
 * thread runs YAFFS2's garbage collector (yaffs_bg_gc) between requests.
 * YAFFS2's trace lines and the driver's fault lines ("yaffs: ...") go to --log
 * (appended; also once the daemon has detached), else to stdout until then.
 * --faults makes a file NAND fail as the lab's nandsim does (yfb_nand.h). */
#define FUSE_USE_VERSION 31

#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "yportenv.h"
#include "yaffsfs.h"

#include "yfb_nand.h"
#include "yfb_yaffs.h"

static struct yaffs_dev *dev;
static pthread_t gc_thread;
static pthread_mutex_t gc_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gc_cond = PTHREAD_COND_INITIALIZER;
static int gc_stop;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* the direct interface's path of a FUSE path */
static const char *ypath(const char *path, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", YFB_MOUNT, strcmp(path, "/") == 0 ? "" : path);
	return buf;
}

#define YPATH(var, path) char var##_buf[1024]; const char *var = ypath(path, var##_buf, sizeof(var##_buf))

/* a failed call's negative errno (the direct interface keeps it negative) */
static int yerr(void)
{
	int e = yaffsfs_GetLastError();

	return e < 0 ? e : e > 0 ? -e : -EIO;
}

static int ret(int r)
{
	return r < 0 ? yerr() : 0;
}

static void fill_stat(const struct yaffs_stat *y, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = y->st_ino;
	st->st_mode = y->st_mode;
	st->st_nlink = y->st_nlink;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_rdev = y->st_rdev;
	st->st_size = y->st_size;
	st->st_blksize = y->st_blksize;
	st->st_blocks = y->st_size / 512 + (y->st_size % 512 != 0);
	st->st_atime = y->yst_atime;
	st->st_mtime = y->yst_mtime;
	st->st_ctime = y->yst_ctime;
}

static int y_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct yaffs_stat y;
	int r;
	YPATH(p, path);

	r = fi ? yaffs_fstat(fi->fh, &y) : yaffs_lstat(p, &y);
	if (r < 0)
		return yerr();
	fill_stat(&y, st);
	return 0;
}

static int y_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
		     struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	yaffs_DIR *d;
	struct yaffs_dirent *e;
	YPATH(p, path);

	(void)off; (void)fi; (void)flags;
	d = yaffs_opendir(p);
	if (!d)
		return yerr();
	filler(buf, ".", NULL, 0, 0);
	filler(buf, "..", NULL, 0, 0);
	while ((e = yaffs_readdir(d)) != NULL)
		if (filler(buf, e->d_name, NULL, 0, 0))
			break;
	yaffs_closedir(d);
	return 0;
}

static int open_flags(int flags)
{
	return flags & (O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_APPEND);
}

static int y_open(const char *path, struct fuse_file_info *fi)
{
	int fd;
	YPATH(p, path);

	fd = yaffs_open(p, open_flags(fi->flags), 0);
	if (fd < 0)
		return yerr();
	fi->fh = fd;
	return 0;
}

static int y_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int fd;
	YPATH(p, path);

	fd = yaffs_open(p, open_flags(fi->flags) | O_CREAT, mode & 07777);
	if (fd < 0)
		return yerr();
	fi->fh = fd;
	return 0;
}

static int y_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	int r = yaffs_pread(fi->fh, buf, size, off);

	(void)path;
	return r < 0 ? yerr() : r;
}

static int y_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	int r;

	(void)path;
	/* O_APPEND: the kernel's offset is its idea of the end; YAFFS2 knows better */
	if (fi->flags & O_APPEND)
		r = yaffs_write(fi->fh, buf, size);
	else
		r = yaffs_pwrite(fi->fh, buf, size, off);
	return r < 0 ? yerr() : r;
}

static int y_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	return ret(yaffs_close(fi->fh));
}

static int y_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	return ret(datasync ? yaffs_fdatasync(fi->fh) : yaffs_fsync(fi->fh));
}

static int y_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path; (void)datasync; (void)fi;
	return ret(yaffs_sync(YFB_MOUNT));
}

static int y_mkdir(const char *path, mode_t mode)
{
	YPATH(p, path);
	return ret(yaffs_mkdir(p, mode & 07777));
}

static int y_rmdir(const char *path)
{
	YPATH(p, path);
	return ret(yaffs_rmdir(p));
}

static int y_unlink(const char *path)
{
	YPATH(p, path);
	return ret(yaffs_unlink(p));
}

static int y_rename(const char *from, const char *to, unsigned int flags)
{
	YPATH(f, from);
	YPATH(t, to);

	if (flags)	/* RENAME_NOREPLACE, RENAME_EXCHANGE: not in the direct interface */
		return -EINVAL;
	return ret(yaffs_rename(f, t));
}

static int y_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	YPATH(p, path);
	return ret(fi ? yaffs_ftruncate(fi->fh, size) : yaffs_truncate(p, size));
}

static int y_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	YPATH(p, path);
	return ret(fi ? yaffs_fchmod(fi->fh, mode & 07777) : yaffs_chmod(p, mode & 07777));
}

static int y_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	(void)path; (void)uid; (void)gid; (void)fi;
	return 0;	/* the direct interface keeps no owner: everything is the daemon's */
}

static int y_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	struct yaffs_utimbuf u;
	time_t t = time(NULL);
	YPATH(p, path);

	u.actime = tv[0].tv_nsec == UTIME_NOW ? t : tv[0].tv_sec;
	u.modtime = tv[1].tv_nsec == UTIME_NOW ? t : tv[1].tv_sec;
	if (tv[0].tv_nsec == UTIME_OMIT || tv[1].tv_nsec == UTIME_OMIT) {
		struct yaffs_stat y;

		if ((fi ? yaffs_fstat(fi->fh, &y) : yaffs_lstat(p, &y)) < 0)
			return yerr();
		if (tv[0].tv_nsec == UTIME_OMIT)
			u.actime = y.yst_atime;
		if (tv[1].tv_nsec == UTIME_OMIT)
			u.modtime = y.yst_mtime;
	}
	return ret(fi ? yaffs_futime(fi->fh, &u) : yaffs_utime(p, &u));
}

static int y_symlink(const char *target, const char *path)
{
	YPATH(p, path);
	return ret(yaffs_symlink(target, p));
}

static int y_readlink(const char *path, char *buf, size_t size)
{
	int r;
	YPATH(p, path);

	memset(buf, 0, size);
	r = yaffs_readlink(p, buf, size - 1);
	return r < 0 ? yerr() : 0;
}

static int y_link(const char *from, const char *to)
{
	YPATH(f, from);
	YPATH(t, to);
	return ret(yaffs_link(f, t));
}

static int y_statfs(const char *path, struct statvfs *s)
{
	struct yaffs_stat y;
	loff_t total = yaffs_totalspace(YFB_MOUNT), avail = yaffs_freespace(YFB_MOUNT);
	unsigned long bsize;

	(void)path;
	if (total < 0 || avail < 0 || yaffs_lstat(YFB_MOUNT, &y) < 0)
		return yerr();
	bsize = y.st_blksize ? y.st_blksize : 4096;
	memset(s, 0, sizeof(*s));
	s->f_bsize = s->f_frsize = bsize;
	s->f_blocks = total / bsize;
	s->f_bfree = s->f_bavail = avail / bsize;
	s->f_namemax = 255;
	return 0;
}

static void *gc_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&gc_mutex);
	while (!gc_stop) {
		struct timespec until;
		int ms;

		pthread_mutex_unlock(&gc_mutex);
		ms = yfb_yaffs_gc_pause_ms(dev);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += ms / 1000;
		until.tv_nsec += (ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&gc_mutex);
		if (!gc_stop)
			pthread_cond_timedwait(&gc_cond, &gc_mutex, &until);
		if (gc_stop)
			break;
		pthread_mutex_unlock(&gc_mutex);
		yfb_yaffs_bg_gc(dev, ms <= 20 ? 2 : ms <= 100 ? 1 : 0);
		pthread_mutex_lock(&gc_mutex);
	}
	pthread_mutex_unlock(&gc_mutex);
	return NULL;
}

/* --- the mount as this process's mount namespace sees it ------------------------
 * The kernel ends a FUSE connection (and with it fuse_loop) only when the last copy
 * of its mount goes, and a mount namespace made while the mount was there keeps a
 * copy for as long as it lives: a sandbox's or a container's, started by anyone on
 * the host. The unmount that whoever mounted us waits on is in our namespace, so
 * that is the one the daemon ends at: a thread watches the namespace's mount table
 * (poll on mountinfo, woken by a change only) and, once no mount of our superblock
 * is left in it, ends the session and interrupts the loop's read (SIGUSR2, which
 * only the loop's thread takes, and only while it loops). The requests' own path
 * is fuse_loop's, not one system call more (the lab charges each to the guest). */

static char mnt_dev[32];	/* the superblock's "major:minor" in mountinfo ("": not found, no watch) */
static pthread_t loop_thread, watch_thread;
static int watch_stop[2] = { -1, -1 };	/* a pipe: the watcher ends when it is written */
static volatile sig_atomic_t loop_over;
static volatile int gone;	/* the mount left this namespace (the connection may live on elsewhere) */

/* a mountinfo path with its octal escapes (\040 for a space...) undone, in place */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; s++, out++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out = *s;
		}
	}
	*out = '\0';
}

/* with `path`: the "major:minor" of the topmost YAFFS2 FUSE mount there into `dev`;
 * without: whether a mount of superblock `dev` is still in the table. 1 if found. */
static int mountinfo(const char *path, char *dev, size_t len)
{
	char line[8192];
	int found = 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return path ? 0 : 1;	/* unreadable now: still there, as far as we know */
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *field, *majmin = NULL, *point = NULL, *type = NULL;
		int i, dash = 0;

		/* ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPEROPTIONS */
		for (i = 0, field = strtok_r(line, " \n", &save); field; i++, field = strtok_r(NULL, " \n", &save)) {
			if (i == 2)
				majmin = field;
			else if (i == 4)
				point = field;
			else if (i > 5 && !dash && !strcmp(field, "-"))
				dash = 1;
			else if (dash) {
				type = field;
				break;
			}
		}
		if (!majmin || !point || !type)
			continue;
		if (!path) {
			if (!strcmp(majmin, dev)) {
				found = 1;
				break;
			}
			continue;
		}
		unescape(point);
		if (!strcmp(point, path) && !strcmp(type, "fuse.yaffs2")) {
			snprintf(dev, len, "%s", majmin);
			found = 1;	/* the last one is on top */
		}
	}
	fclose(f);
	return found;
}

static void wake(int sig)
{
	(void)sig;	/* only to interrupt the loop's read (no SA_RESTART) */
}

static void *watch_main(void *arg)
{
	struct fuse_session *se = arg;
	struct pollfd p[2] = { { .fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC), .events = POLLPRI },
			       { .fd = watch_stop[0], .events = POLLIN } };
	int changed = 1;	/* an unmount before the watch began counts too */

	while (p[0].fd >= 0) {
		if (changed && !mountinfo(NULL, mnt_dev, sizeof(mnt_dev))) {
			gone = 1;
			fuse_session_exit(se);
			/* again until the loop is over: a signal just before its read() is lost */
			while (!loop_over) {
				pthread_kill(loop_thread, SIGUSR2);
				poll(&p[1], 1, 10);
			}
			break;
		}
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;	/* the daemon is ending of itself */
		changed = (p[0].revents & (POLLPRI | POLLERR)) != 0;
	}
	if (p[0].fd >= 0)
		close(p[0].fd);
	return NULL;
}

/* fuse_loop, ended also when our mount leaves this namespace */
static int serve(struct fuse *fuse)
{
	struct sigaction sa = { .sa_handler = wake };
	sigset_t usr2;
	int r, watching;

	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	sigemptyset(&sa.sa_mask);
	loop_thread = pthread_self();
	watching = mnt_dev[0] && pipe(watch_stop) == 0 && sigaction(SIGUSR2, &sa, NULL) == 0 &&
		   pthread_create(&watch_thread, NULL, watch_main, fuse_get_session(fuse)) == 0;
	pthread_sigmask(SIG_UNBLOCK, &usr2, NULL);
	r = fuse_loop(fuse);
	pthread_sigmask(SIG_BLOCK, &usr2, NULL);	/* from here a late one stays pending, harmless */
	loop_over = 1;
	if (watching) {
		if (write(watch_stop[1], "", 1) < 0)
			pthread_cancel(watch_thread);
		pthread_join(watch_thread, NULL);
	}
	return r;
}

static const struct fuse_operations ops = {
	.getattr = y_getattr,
	.readdir = y_readdir,
	.open = y_open,
	.create = y_create,
	.read = y_read,
	.write = y_write,
	.release = y_release,
	.fsync = y_fsync,
	.fsyncdir = y_fsyncdir,
	.mkdir = y_mkdir,
	.rmdir = y_rmdir,
	.unlink = y_unlink,
	.rename = y_rename,
	.truncate = y_truncate,
	.chmod = y_chmod,
	.chown = y_chown,
	.utimens = y_utimens,
	.symlink = y_symlink,
	.readlink = y_readlink,
	.link = y_link,
	.statfs = y_statfs,
};

static void usage(void)
{
	fprintf(stderr, "usage: flashbed-yaffs2 (--mtd /dev/mtdN | --file PATH --geometry PAGE:OOB:PAGES:BLOCKS "
			"[--faults LIST]) [--stats FILE] [--log FILE] [--pidfile FILE] [--no-checkpoint] "
			"[--foreground] MOUNTPOINT\n");
}

/* where the JSON lines go on stdout: stdout itself, or (with --log, which takes
 * stdout for the trace lines) a copy of it made first */
static FILE *json_out;

/* a JSON line to --stats (if given), and to stdout while there is one (before the
 * daemon detaches: the command that mounts sees its mount time) */
static void stats_line(const char *path, const char *line, int on_stdout)
{
	FILE *f;

	if (on_stdout) {
		fprintf(json_out, "%s\n", line);
		fflush(json_out);
	}
	if (!path)
		return;
	f = fopen(path, "a");
	if (f) {
		fprintf(f, "%s\n", line);
		fclose(f);
	}
}

static const char *absolute(const char *path)
{
	char cwd[4096], *out;

	if (!path || path[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		return path;
	out = malloc(strlen(cwd) + strlen(path) + 2);
	if (!out)
		return path;
	sprintf(out, "%s/%s", cwd, path);
	return out;
}

int main(int argc, char **argv)
{
	const char *mtd = NULL, *file = NULL, *geometry = NULL, *stats = NULL, *pidfile = NULL, *mnt = NULL;
	const char *log = NULL, *faults = NULL;
	char *real_mnt;
	int no_checkpoint = 0, foreground = 0, log_fd = -1, i, r;
	unsigned page = 0, oob = 0, pages = 0, blocks = 0;
	char err[512], line[1024];
	struct yfb_nand *nand;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse *fuse;
	struct yfb_counters c;
	unsigned long bad_blocks;
	double t0, mount_s, unmount_s;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--mtd") && i + 1 < argc)
			mtd = argv[++i];
		else if (!strcmp(a, "--file") && i + 1 < argc)
			file = argv[++i];
		else if (!strcmp(a, "--geometry") && i + 1 < argc)
			geometry = argv[++i];
		else if (!strcmp(a, "--stats") && i + 1 < argc)
			stats = argv[++i];
		else if (!strcmp(a, "--log") && i + 1 < argc)
			log = argv[++i];
		else if (!strcmp(a, "--faults") && i + 1 < argc)
			faults = argv[++i];
		else if (!strcmp(a, "--pidfile") && i + 1 < argc)
			pidfile = argv[++i];
		else if (!strcmp(a, "--no-checkpoint"))
			no_checkpoint = 1;
		else if (!strcmp(a, "--foreground"))
			foreground = 1;
		else if (a[0] != '-' && !mnt)
			mnt = a;
		else {
			fprintf(stderr, "flashbed-yaffs2: unknown argument %s\n", a);
			usage();
			return 2;
		}
	}
	if (!mnt || !!mtd == !!file || (file && !geometry)) {
		usage();
		return 2;
	}
	if (faults && !file) {
		fprintf(stderr, "flashbed-yaffs2: --faults is for a file NAND (--file); nandsim has its own\n");
		return 2;
	}
	json_out = stdout;
	if (log) {
		log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (log_fd < 0) {
			fprintf(stderr, "flashbed-yaffs2: cannot open --log %s: %s\n", log, strerror(errno));
			return 2;
		}
		json_out = fdopen(dup(STDOUT_FILENO), "w");
		if (!json_out) {
			fprintf(stderr, "flashbed-yaffs2: cannot keep stdout beside --log: %s\n", strerror(errno));
			return 1;
		}
		fflush(stdout);
		dup2(log_fd, STDOUT_FILENO);
	}
	/* a line at a time: a killed daemon's log keeps every line it printed */
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* the daemon runs in / : the files it writes later are named absolutely now */
	stats = absolute(stats);
	pidfile = absolute(pidfile);
	if (file && sscanf(geometry, "%u:%u:%u:%u", &page, &oob, &pages, &blocks) != 4) {
		fprintf(stderr, "flashbed-yaffs2: --geometry %s: give PAGE:OOB:PAGES:BLOCKS, e.g. 4096:78:64:256\n",
			geometry);
		return 2;
	}
	nand = mtd ? yfb_mtd_open(mtd, err, sizeof(err))
		   : yfb_file_open(file, page, oob, pages, blocks, faults, err, sizeof(err));
	if (!nand || !yfb_yaffs_device(nand, err, sizeof(err))) {
		fprintf(stderr, "flashbed-yaffs2: %s\n", err);
		return strstr(err, "--faults") == err ? 2 : 1;
	}
	dev = yaffs_getdev(YFB_MOUNT);

	t0 = now_s();
	r = yaffs_mount_common(YFB_MOUNT, 0, no_checkpoint);
	mount_s = now_s() - t0;
	if (r < 0) {
		fprintf(stderr, "flashbed-yaffs2: yaffs_mount failed: %s\n", yaffs_error_to_str(yaffsfs_GetLastError()));
		return 1;
	}
	yfb_yaffs_counters(dev, &c);
	snprintf(line, sizeof(line),
		 "{\"event\": \"mount\", \"mount_s\": %.6f, \"checkpoint_restored\": %s, \"page_size\": %u, "
		 "\"pages_per_block\": %u, \"blocks\": %u, \"oob_avail\": %u, \"bad_blocks\": %lu}",
		 mount_s, yfb_yaffs_restored(dev) ? "true" : "false", nand->page_size, nand->pages_per_block,
		 nand->blocks, nand->oob_avail, c.bad_blocks);
	stats_line(stats, line, 1);

	real_mnt = realpath(mnt, NULL);	/* as the mount table will name it (resolved before the mount covers it) */
	fuse_opt_add_arg(&args, argv[0]);
	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, "fsname=yaffs2,subtype=yaffs2,default_permissions");
	fuse = fuse_new(&args, &ops, sizeof(ops), NULL);
	if (!fuse || fuse_mount(fuse, mnt) != 0) {
		fprintf(stderr, "flashbed-yaffs2: cannot mount FUSE on %s\n", mnt);
		yaffs_unmount(YFB_MOUNT);
		return 1;
	}
	/* ours in the mount table (read there: a stat of the mount would wait for the loop) */
	if (!real_mnt || !mountinfo(real_mnt, mnt_dev, sizeof(mnt_dev)))
		mnt_dev[0] = '\0';	/* no /proc here: the kernel's end of the connection alone */
	fuse_set_signal_handlers(fuse_get_session(fuse));
	/* the parent returns once the mount is there; threads start after the fork */
	if (fuse_daemonize(foreground) != 0)
		return 1;
	if (log_fd >= 0 && !foreground) {
		/* detaching pointed stdout and stderr at /dev/null; the copy of the
		 * caller's stdout must go too, or whoever reads it waits for our exit */
		fclose(json_out);
		json_out = stdout;
		dup2(log_fd, STDOUT_FILENO);
		dup2(log_fd, STDERR_FILENO);
	}
	if (pidfile) {
		FILE *f = fopen(pidfile, "w");

		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
	}
	{
		sigset_t usr2;	/* SIGUSR2 is the loop's alone: the threads made from here block it */

		sigemptyset(&usr2);
		sigaddset(&usr2, SIGUSR2);
		pthread_sigmask(SIG_BLOCK, &usr2, NULL);
	}
	pthread_create(&gc_thread, NULL, gc_main, NULL);
	r = serve(fuse);

	pthread_mutex_lock(&gc_mutex);
	gc_stop = 1;
	pthread_cond_signal(&gc_cond);
	pthread_mutex_unlock(&gc_mutex);
	pthread_join(gc_thread, NULL);
	fuse_remove_signal_handlers(fuse_get_session(fuse));
	/* gone: nothing of ours is mounted here (libfuse would detach whatever is at the
	 * path now); closing the connection (fuse_destroy) leaves any copy elsewhere dead */
	if (!gone)
		fuse_unmount(fuse);
	fuse_destroy(fuse);

	yfb_yaffs_counters(dev, &c);
	bad_blocks = c.bad_blocks;	/* while YAFFS2 still holds its block table */
	t0 = now_s();
	yaffs_unmount(YFB_MOUNT);	/* writes the checkpoint */
	unmount_s = now_s() - t0;
	yfb_yaffs_counters(dev, &c);
	snprintf(line, sizeof(line),
		 "{\"event\": \"unmount\", \"unmount_s\": %.6f, \"page_reads\": %lu, \"page_writes\": %lu, "
		 "\"erasures\": %lu, \"gc_copies\": %lu, \"bg_gcs\": %lu, \"ecc_fixed\": %lu, \"ecc_unfixed\": %lu, "
		 "\"retired_blocks\": %lu, \"bad_blocks\": %lu}",
		 unmount_s, c.page_reads, c.page_writes, c.erasures, c.gc_copies, c.bg_gcs, c.ecc_fixed,
		 c.ecc_unfixed, c.retired_blocks, bad_blocks);
	stats_line(stats, line, foreground);
	nand->close(nand);
	return r ? 1 : 0;
}
