// A Curator 5.4 process for the interop tests (curator_interop_test.cpp): it takes a lock with
// Apache Curator's own recipes on a path that a lockstep ZooKeeper lock also uses, driven line by
// line on stdin; every lock call runs on one worker thread (Curator's locks belong to the thread
// that acquired them), and every answer is one line on stdout:
//
//   java CuratorPeer <connect string> <session timeout ms> <lock path> <mutex|read|write>
//   acquire       -> "queued" once this process's node is among the lock's participants, then
//                    "acquired <czxid of that node>" when it holds the lock
//   try           -> "acquired <czxid>" or "busy" (no wait)
//   release       -> "released"
//   participants  -> "participants <number of nodes under the lock path>"
//   exit          -> "bye" (a held lock is released first), then the process ends
//
// "ready" is printed once the session is connected; a failed command prints "error <class>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.RetryOneTime;

public final class CuratorPeer {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        final String path = args[2];
        final CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0]).sessionTimeoutMs(Integer.parseInt(args[1])).connectionTimeoutMs(10000)
                .retryPolicy(new RetryOneTime(100)).build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            say("error NotConnected");
            return;
        }
        final InterProcessMutex lock;
        switch (args[3]) {
            case "mutex": lock = new InterProcessMutex(client, path); break;
            case "read": lock = new InterProcessReadWriteLock(client, path).readLock(); break;
            default: lock = new InterProcessReadWriteLock(client, path).writeLock(); break;
        }
        final ExecutorService worker = Executors.newSingleThreadExecutor();
        say("ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            try {
                switch (line.trim()) {
                    case "acquire": {
                        final int before = participants(client, path);
                        Future<?> done = worker.submit(() -> {
                            try {
                                lock.acquire();
                                say("acquired " + czxid(client, lock));
                            } catch (Exception e) {
                                say("error " + e.getClass().getSimpleName());
                            }
                        });
                        // Our node is created before acquire() waits: report it once it exists.
                        while (!done.isDone() && participants(client, path) <= before) Thread.sleep(2);
                        say("queued");
                        break;
                    }
                    case "try":
                        worker.submit(() -> {
                            try {
                                say(lock.acquire(0, TimeUnit.MILLISECONDS) ? "acquired " + czxid(client, lock) : "busy");
                            } catch (Exception e) {
                                say("error " + e.getClass().getSimpleName());
                            }
                        }).get();
                        break;
                    case "release":
                        worker.submit(() -> {
                            try {
                                lock.release();
                                say("released");
                            } catch (Exception e) {
                                say("error " + e.getClass().getSimpleName());
                            }
                        }).get();
                        break;
                    case "participants":
                        say("participants " + participants(client, path));
                        break;
                    case "exit":
                        worker.submit(() -> {
                            try {
                                if (lock.isOwnedByCurrentThread()) lock.release();
                            } catch (Exception ignored) {
                            }
                        }).get();
                        say("bye");
                        worker.shutdownNow();
                        client.close();
                        return;
                    default:
                        say("error UnknownCommand");
                }
            } catch (Exception e) {
                say("error " + e.getClass().getSimpleName());
            }
        }
        worker.shutdownNow();
        client.close();
    }

    private static int participants(CuratorFramework client, String path) throws Exception {
        return client.checkExists().forPath(path) == null ? 0 : client.getChildren().forPath(path).size();
    }

    // The czxid of the node this process holds the lock with (InterProcessMutex.getLockPath is
    // protected: read through reflection, on the thread that holds the lock).
    private static long czxid(CuratorFramework client, InterProcessMutex lock) throws Exception {
        Method m = InterProcessMutex.class.getDeclaredMethod("getLockPath");
        m.setAccessible(true);
        return client.checkExists().forPath((String) m.invoke(lock)).getCzxid();
    }
}
