package lockstep.runtime;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (checksummed, so whatever casts to LocalFileSystem still works), with
 * a file's permissions set through java.nio instead of a child process.
 *
 * Without Hadoop's native library, RawLocalFileSystem runs `chmod` as a child process for every
 * file and directory it creates: six per micro-batch of a streaming query (its offset, commit and
 * source-log entries, each with its .crc file), each a fork of the driver's JVM. Spark is given
 * this class as `fs.file.impl` (jobs/runtime/local_fs.py).
 */
public class LocalFileSystemWithoutForks extends LocalFileSystem {

  public LocalFileSystemWithoutForks() {
    super(new Raw());
  }

  /** The raw local file system whose setPermission stays in the JVM. */
  public static class Raw extends RawLocalFileSystem {
    private static final int PERMISSION_BITS = 0777;

    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      short mode = permission.toShort();
      if ((mode & ~PERMISSION_BITS) != 0) {
        super.setPermission(path, permission); // sticky bit and the like: java.nio cannot set them
        return;
      }
      Files.setPosixFilePermissions(pathToFile(path).toPath(), posix(mode));
    }
  }

  // From the lowest bit up, as in an octal mode: others x w r, group x w r, owner x w r.
  private static final PosixFilePermission[] BITS = {
    PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
    PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
  };

  static Set<PosixFilePermission> posix(short mode) {
    Set<PosixFilePermission> permissions = EnumSet.noneOf(PosixFilePermission.class);
    for (int bit = 0; bit < BITS.length; bit++) {
      if ((mode >> bit & 1) == 1) {
        permissions.add(BITS[bit]);
      }
    }
    return permissions;
  }
}
