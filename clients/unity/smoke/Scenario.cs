// Drives the package's Runtime against a real oamd the way a game would, outside Unity:
//   mono scenario.exe stdio EXECUTABLE DISPATCH       (the client spawns `EXECUTABLE stdio` itself)
//   mono scenario.exe tcp HOST PORT TOKEN_FILE DISPATCH
//   mono scenario.exe argv|cmdline|spawn|json|lifetime ...   (single checks, see their methods)
// DISPATCH is `context` (a single-threaded SynchronizationContext on the main thread, as Unity's) or
// `pump` (no context; the main thread calls Pump, as an Update loop would). It runs a guard-and-gate turn
// with a client tool, a tool/cancel, an NPC talk and bark, a decision, a world set/get/subscription and an
// error, printing one `key: value` line per check for tests/test_unity_package.py; exit 0, or 1 with the
// error (a refused token prints `refused: NAME AUTH`).

using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Oamd;

static class Scenario
{
    static int _mainThread;
    static int _daemonPid;
    static readonly ConcurrentBag<string> CallbackThreads = new ConcurrentBag<string>();

    static int Main(string[] args)
    {
        if (args[0] == "argv") return EchoArguments(args);
        if (args[0] == "cmdline") return PrintCommandLine(args);
        if (args[0] == "spawn") return Spawn(args[1]);
        if (args[0] == "json") return RoundTripJson();
#if UNITY_EDITOR
        if (args[0] == "lifetime") return Lifetime(args[1]);
#endif
        _mainThread = Thread.CurrentThread.ManagedThreadId;
        Console.WriteLine("main-thread: " + _mainThread);
        string dispatch = args[args.Length - 1];
        try
        {
            if (dispatch == "context") MainLoop.Run(() => Run(args));  // as Unity's main thread
            else RunWithPump(args);
            return 0;
        }
        catch (OamdException ex) when (ex.Name == "invalid_message" && ex.Data.ContainsKey("auth"))
        {
            Console.WriteLine("refused: " + ex.Name + " " + ex.Data["auth"]);
            return 1;
        }
        catch (Exception ex)
        {
            Console.WriteLine("error: " + ex);
            return 1;
        }
    }

    // `argv ECHO EXE-ARGS...`: starts ECHO (a program printing its own arguments) with the line
    // OamdProcessOptions builds, as StdioTransport does, to check the runtime splits it back unchanged.
    static int EchoArguments(string[] args)
    {
        var options = new OamdProcessOptions();
        for (int i = 2; i < args.Length; i++) options.ExtraArguments.Add(args[i]);
        var info = new System.Diagnostics.ProcessStartInfo(args[1], options.CommandLine()) {
            UseShellExecute = false, RedirectStandardOutput = true,
            StandardOutputEncoding = new System.Text.UTF8Encoding(false),
        };
        using (var echo = System.Diagnostics.Process.Start(info))
        {
            Console.Write(echo.StandardOutput.ReadToEnd());
            echo.WaitForExit();
            return echo.ExitCode;
        }
    }

    // `cmdline ARGS...`: prints the argument line OamdProcessOptions builds, for a check of the
    // Windows (CommandLineToArgvW) reading on any OS.
    static int PrintCommandLine(string[] args)
    {
        var options = new OamdProcessOptions();
        for (int i = 1; i < args.Length; i++) options.ExtraArguments.Add(args[i]);
        Console.Write(options.CommandLine());
        return 0;
    }

    // `spawn PATH`: StdioTransport.Start on PATH, then Dispose; prints `spawn: ok` or the exception type.
    static int Spawn(string path)
    {
        try
        {
            using (StdioTransport.Start(new OamdProcessOptions { ExecutablePath = path, ExitTimeout = TimeSpan.FromSeconds(1) }))
                Console.WriteLine("spawn: ok");
        }
        catch (Exception ex)
        {
            Console.WriteLine("spawn: " + ex.GetType().Name + " " + ex.Message);
        }
        return 0;
    }

    // `json`: each stdin line read and written back by Json (or the exception's type), then values only
    // Json.Write sees: dictionaries of other value types and a cycle.
    static int RoundTripJson()
    {
        string line;
        while ((line = Console.In.ReadLine()) != null)
        {
            try { Console.WriteLine(Json.Write(Json.Read(line))); }
            catch (Exception ex) { Console.WriteLine(ex.GetType().Name); }
        }
        Console.WriteLine(Json.Write(new Dictionary<string, int> { { "gold", 7 } }));
        Console.WriteLine(Json.Write(new System.Collections.Hashtable { { 1, new Dictionary<string, string> { { "a", "b" } } } }));
        var cycle = new List<object>();
        cycle.Add(cycle);
        try { Console.WriteLine(Json.Write(cycle)); }
        catch (Exception ex) { Console.WriteLine(ex.GetType().Name); }
        return 0;
    }

#if UNITY_EDITOR
    // `lifetime EXECUTABLE` (built with the UnityEngine and UnityEditor stubs): plays the editor's part,
    // as Unity would call the package's load hooks and raise its events, and prints per step whether the
    // client it opened is closed and its daemon gone: play mode ending, scripts reloading (an edit-mode
    // client) and the player quitting (a second play, hooks run again as without a domain reload).
    static int Lifetime(string exe)
    {
        var lifetime = typeof(OamdClient).Assembly.GetType("Oamd.OamdLifetime", true);
        Action<Type> runHooks = attribute =>
        {
            foreach (var method in lifetime.GetMethods(System.Reflection.BindingFlags.Static | System.Reflection.BindingFlags.NonPublic))
                if (method.IsDefined(attribute, false)) method.Invoke(null, null);
        };
        runHooks(typeof(UnityEditor.InitializeOnLoadMethodAttribute));
        runHooks(typeof(UnityEngine.RuntimeInitializeOnLoadMethodAttribute));
        Report("play-mode-exit", exe, () => UnityEditor.EditorApplication.RaisePlayModeStateChanged(UnityEditor.PlayModeStateChange.ExitingPlayMode));
        Report("script-reload", exe, UnityEditor.AssemblyReloadEvents.RaiseBeforeAssemblyReload);
        runHooks(typeof(UnityEngine.RuntimeInitializeOnLoadMethodAttribute));
        runHooks(typeof(UnityEngine.RuntimeInitializeOnLoadMethodAttribute));
        Report("player-quit", exe, UnityEngine.Application.RaiseQuitting);
        return 0;
    }

    static void Report(string step, string exe, Action unityEvent)
    {
        var transport = StdioTransport.Start(new OamdProcessOptions { ExecutablePath = exe });
        int pid = transport.ProcessId;
        var client = OamdClient.ConnectAsync(transport, null).GetAwaiter().GetResult();
        var edit = OamdClient.ConnectAsync(StdioTransport.Start(new OamdProcessOptions { ExecutablePath = exe }), null)
            .GetAwaiter().GetResult();
        unityEvent();
        Console.WriteLine(step + ": " + client.State + " daemon-exited=" + (Exited(pid) ? "yes" : "no"));
        edit.Dispose();
    }
#endif

    static void Note(string what)
    {
        int thread = Thread.CurrentThread.ManagedThreadId;
        CallbackThreads.Add(what + "@" + thread);
    }

    static Task<OamdClient> Connect(string[] args, MainThreadQueue queue)
    {
        var options = new OamdClientOptions { ClientName = "unity-scenario", Queue = queue };
        if (args[0] == "stdio")
        {
            // StartAsync in two steps, to learn the daemon's pid and check that Dispose ends it.
            var transport = StdioTransport.Start(new OamdProcessOptions { ExecutablePath = args[1], ToolTimeoutSeconds = 30 });
            _daemonPid = transport.ProcessId;
            Console.WriteLine("daemon-pid: " + _daemonPid);
            return OamdClient.ConnectAsync(transport, null, options);
        }
        return OamdClient.ConnectTcpAsync(args[1], int.Parse(args[2]), OamdClient.ReadToken(args[3]), options);
    }

    // Pump mode: the scenario runs on the thread pool; the main thread only drains callbacks.
    static void RunWithPump(string[] args)
    {
        var queue = new MainThreadQueue();
        var work = Task.Run(() => Run(args, queue));
        var deadline = DateTime.UtcNow.AddSeconds(50);
        while (!work.IsCompleted && DateTime.UtcNow < deadline) queue.Pump(TimeSpan.FromMilliseconds(50));
        if (!work.IsCompleted) throw new TimeoutException("The scenario did not finish in 50 s.");
        work.GetAwaiter().GetResult();
    }

    static Task Run(string[] args)
    {
        return Run(args, null);
    }

    static async Task Run(string[] args, MainThreadQueue queue)
    {
        using (var client = await Connect(args, queue))
        {
            Console.WriteLine("server: " + client.Server.Name + " " + client.Server.ProtocolVersion);
            await GuardAndGate(client);
            await ToolCancel(client);
            await Npc(client);
            await Decide(client);
            await World(client);
            try
            {
                await client.RespondAsync("nope", "Hello?");
                Console.WriteLine("error: none");
            }
            catch (OamdException ex)
            {
                Console.WriteLine("error-name: " + ex.Name + " " + ex.Code);
            }
        }
        if (_daemonPid != 0) Console.WriteLine("daemon-exited: " + (Exited(_daemonPid) ? "yes" : "no"));
        var threads = new List<string>(CallbackThreads);
        bool allMain = threads.TrueForAll(t => t.EndsWith("@" + _mainThread));
        var kinds = new SortedSet<string>(threads.ConvertAll(t => t.Substring(0, t.IndexOf('@'))));
        Console.WriteLine("callback-kinds: " + string.Join(",", kinds));
        Console.WriteLine("callbacks-on-main-thread: " + (allMain ? "yes" : "no " + string.Join(",", threads)));
    }

    static async Task GuardAndGate(OamdClient client)
    {
        var openGate = client.RegisterTool(
            ToolDefinition.WithStringArguments("open_gate", "Open a gate of the castle.", "gate"),
            call =>
            {
                Note("tool");
                return "the " + call.Argument("gate") + " gate is open";
            });
        // Pump mode resumes this method on a pool thread as soon as a result arrives, maybe before the
        // main thread has pumped the events queued ahead of it: so wait for them, never just count them.
        var textEvent = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        client.SessionEvent += e =>
        {
            Note("event");
            if (e.Type == "text") textEvent.TrySetResult(e.Text);
        };
        var model = new ScriptedModel()
            .ToolCall("open_gate", new Dictionary<string, object> { { "gate", "north" } })
            .Template("{toolOutput}");
        var created = await client.CreateSessionAsync("guard", "You guard the castle.", new[] { openGate }, model);
        var result = await client.RespondAsync(created.Id, "Open the north gate.", stream: true);
        Console.WriteLine("turn: " + result.Text);
        Console.WriteLine("tool-record: " + result.ToolCalls[0].Name + " " + result.ToolCalls[0].Output + " error=" + result.ToolCalls[0].IsError);
        Console.WriteLine("usage: " + (result.Usage.TotalTokens > 0 ? "yes" : "no"));
        Console.WriteLine("text-events: " + (await WithTimeout(textEvent.Task, "no text event") != null ? "yes" : "no"));
        await client.DeleteSessionAsync("guard");
    }

    // A handler that waits for the game: the daemon's timeout sends tool/cancel, which must cancel its token.
    static async Task ToolCancel(OamdClient client)
    {
        var cancelled = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        var slow = new ToolDefinition("wait_for_player", "Wait until the player acts.") { TimeoutSeconds = 0.5 };
        client.RegisterTool(slow, async (call, token) =>
        {
            Note("slow-tool");
            token.Register(() => { Note("token"); cancelled.TrySetResult(call.Id); });
            await Task.Delay(Timeout.Infinite, token);
            return "never";
        });
        var notice = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        client.ToolCancelled += e => { Note("cancel-event"); notice.TrySetResult(e.CallId); };
        var model = new ScriptedModel().ToolCall("wait_for_player").Template("{toolOutput}");
        await client.CreateSessionAsync("slow", tools: new[] { slow }, model: model);
        var result = await client.RespondAsync("slow", "Wait.");
        string cancelledCall = await WithTimeout(cancelled.Task, "the handler's token was not cancelled");
        string noticed = await WithTimeout(notice.Task, "no ToolCancelled event");
        Console.WriteLine("tool-cancel: " + (cancelledCall == result.ToolCalls[0].Id && noticed == cancelledCall ? "token cancelled" : "mismatch"));
        Console.WriteLine("timed-out-turn: " + result.ToolCalls[0].IsError);
    }

    static async Task Npc(OamdClient client)
    {
        var emotion = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        client.NpcEvent += e => { Note("npc-event"); if (e.Type == "emotion") emotion.TrySetResult(e.Emotion); };
        var reply = new Dictionary<string, object> {
            { "emotion", "suspicious" }, { "line", "Who goes there?" },
            { "player_options", new List<object> { "A friend.", "Nobody." } },
        };
        var model = new ScriptedModel().Json(reply).Text("Quiet night.");
        var persona = new Persona("Brom") { Role = "gate guard", Personality = "Wary." };
        await client.CreateNpcAsync(persona, "brom", model: model);
        var talk = await client.TalkAsync("brom", "Hello!", stream: true);
        Console.WriteLine("npc: " + talk.Line + " (" + talk.Emotion + ") options=" + talk.PlayerOptions.Count
            + " streamed-emotion=" + await WithTimeout(emotion.Task, "no emotion event"));
        Console.WriteLine("bark: " + await client.BarkAsync("brom", "It is getting dark."));
    }

    static async Task Decide(OamdClient client)
    {
        var request = new DecisionRequest("The goblin has 3 HP left.", "fight", "flee")
            .Option("beg", "Plead for mercy.");
        var answer = new Dictionary<string, object> { { "reasoning", "Too weak." }, { "choice", "flee" }, { "confidence", 78 } };
        var decision = await client.DecideAsync(request, new ScriptedModel().Json(answer));
        Console.WriteLine("decision: " + decision.OptionId + " " + decision.Confidence + " fallback=" + decision.IsFallback);
    }

    static async Task World(OamdClient client)
    {
        var changed = new TaskCompletionSource<object>(TaskCreationOptions.RunContinuationsAsynchronously);
        client.WorldChanged += e => { Note("world-event"); changed.TrySetResult(e.NewValue); };
        await client.CreateWorldAsync("castle", new Dictionary<string, object> {
            { "gate", new Dictionary<string, object> { { "open", false } } } });
        await client.SubscribeWorldAsync("castle", "gate");
        long version = await client.WorldSetAsync("castle", "gate.open", true);
        var value = await client.WorldGetAsync("castle", "gate.open");
        object notified = await WithTimeout(changed.Task, "no world/changed arrived");
        Console.WriteLine("world: " + value.Value + " exists=" + value.Exists + " version=" + (value.Version == version)
            + " notified=" + notified);
    }

    static bool Exited(int pid)
    {
        try { return System.Diagnostics.Process.GetProcessById(pid).HasExited; }
        catch (ArgumentException) { return true; }  // no such process any more
    }

    static async Task<T> WithTimeout<T>(Task<T> task, string what)
    {
        if (await Task.WhenAny(task, Task.Delay(10000)) != task) throw new TimeoutException(what);
        return await task;
    }
}
