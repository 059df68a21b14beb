// Plays the Tavern sample's game (com.oamd.client/Samples~/Tavern/TavernGame.cs) headless, as its UI
// would, against a real oamd the client spawns:
//   mono tavern.exe EXECUTABLE scripted          (TavernScripts: every line known in advance)
//   mono tavern.exe EXECUTABLE model SPEC        (the daemon's --model SPEC speaks for the NPCs)
// On MainLoop's single-threaded context, as on Unity's main thread: the player comes in (bark, the
// guard's decision), orders from the innkeeper (the client tool), time passes (world/set), a second turn,
// the guard talks (a streamed line with a reset), the evening is saved, the daemon ends, and a fresh one
// loads the save. One `key: value` line per check for tests/test_unity_tavern.py; exit 0, or 1 with
// `error: ...`.

using System;
using System.Collections.Generic;
using System.Threading.Tasks;
using Oamd;
using OamdSamples.Tavern;

static class TavernRun
{
    // every npc/event the game's clients raised, as `npc:type value`, and whether one ran off the main thread
    static readonly List<string> Events = new List<string>();
    static bool _eventsOffMain;
    // the emotion label as the game showed it when the line's last delta came
    static string _labelWhileStreaming;

    static int Main(string[] args)
    {
        bool scripted = args[1] == "scripted";
        try
        {
            MainLoop.Run(() => Play(args[0], scripted, scripted ? null : args[2]));
            return 0;
        }
        catch (Exception ex)
        {
            Console.WriteLine("error: " + ex);
            return 1;
        }
    }

    static void Say(string key, object value)
    {
        Console.WriteLine(key + ": " + value);
    }

    static async Task<OamdClient> Start(string exe, string model, List<int> pids)
    {
        // StartAsync in two steps, to learn each daemon's pid
        var transport = StdioTransport.Start(new OamdProcessOptions { ExecutablePath = exe, Model = model });
        pids.Add(transport.ProcessId);
        var client = await OamdClient.ConnectAsync(transport, null, new OamdClientOptions { ClientName = "tavern" });
        client.NpcEvent += e =>
        {
            if (!MainLoop.OnMainThread) _eventsOffMain = true;
            string value = e.Type == "emotion" ? " " + e.Emotion : e.Type == "lineDelta" ? " " + e.Delta
                : e.Type == "lineReset" ? " " + e.Line : "";
            Events.Add(e.Npc + ":" + e.Type + value);
        };
        if (model != null) Say("model-" + pids.Count, Describe(await client.WaitForModelAsync()));
        return client;
    }

    static async Task Play(string exe, bool scripted, string model)
    {
        var pids = new List<int>();
        string saved;
        using (var client = await Start(exe, model, pids))
        {
            var game = await TavernGame.OpenAsync(client, scripted);
            Watch(client, game);
            var decision = await game.PlayerEntersAsync();
            Say("bark", game.Speaker + " " + game.Subtitle);
            Say("decision", decision.OptionId + " confidence=" + decision.Confidence + " fallback=" + decision.IsFallback
                + " door=" + (game.DoorOpen ? "open" : "shut"));
            Say("world-door", Json.Write((await client.WorldGetAsync(TavernGame.World, "door.open")).Value));

            var order = await game.SayAsync(TavernGame.Innkeeper, "Two ales, please.");
            Turn("innkeeper", game, order);
            foreach (var record in order.ToolCalls)
                Say("innkeeper-tool-" + record.Name, Json.Write(record.Arguments) + " -> " + Json.Write(record.Output)
                    + " error=" + record.IsError);
            Say("gold", game.Gold + " world=" + Json.Write((await client.WorldGetAsync(TavernGame.World, "player.gold")).Value));
            Say("innkeeper-relationship", order.Relationship);

            // a game event writes the world; her next prompt reads it
            long before = (await client.WorldGetAsync(TavernGame.World, "timeOfDay")).Version;
            await game.PassTimeAsync();
            var time = await client.WorldGetAsync(TavernGame.World, "timeOfDay");
            Say("time", game.TimeOfDay + " world=" + Json.Write(time.Value) + " version-grew=" + (time.Version > before));
            var choice = game.Choices.Find(c => c.Npc == TavernGame.Innkeeper) ?? new Choice(TavernGame.Innkeeper, "Anything else?");
            Say("choice", choice.Npc + " " + choice.Line);
            Turn("innkeeper-2", game, await game.ChooseAsync(choice));
            Say("innkeeper-2-prompt-state", GameStateOfLastPrompt(await client.NpcStateAsync(TavernGame.Innkeeper)));

            Turn("guard", game, await game.SayAsync(TavernGame.Guard, "Any trouble tonight?"));
            Say("events", Json.Write(Events));
            var saving = await client.NpcStateAsync(TavernGame.Innkeeper);
            Say("innkeeper-knowledge", Json.Write(Get(Get(saving, "persona") as Dictionary<string, object>, "knowledge")));
            Say("saved-transcript-entries", Entries(saving).Count);

            saved = await game.SaveAsync();
            Say("saved", saved.Length > 0 ? "yes" : "no");
            game.Dispose();
        }
        Say("first-daemon-exited", Exited(pids[0]) ? "yes" : "no");

        using (var client = await Start(exe, model, pids))
        {
            var game = await TavernGame.LoadAsync(client, saved, scripted);
            Watch(client, game);
            Say("fresh-daemon", pids[1] != pids[0] && !Exited(pids[1]) ? "yes" : "no");
            Say("restored-game", "gold=" + game.Gold + " time=" + game.TimeOfDay + " door=" + (game.DoorOpen ? "open" : "shut"));
            Say("restored-world", Json.Write(await client.WorldSnapshotAsync(TavernGame.World)));
            var state = await client.NpcStateAsync(TavernGame.Innkeeper);
            Say("restored-memory", Json.Write(Get(state, "memory")));
            Say("restored-transcript-entries", Entries(state).Count);
            Events.Clear();
            var back = await game.SayAsync(TavernGame.Innkeeper, "I'm back.");
            Turn("restored", game, back);
            Say("restored-relationship", back.Relationship);
            Say("restored-events", Json.Write(Events));
            game.Dispose();
        }
        Say("events-on-main-thread", _eventsOffMain ? "no" : "yes");
    }

    static void Watch(OamdClient client, TavernGame game)
    {
        // subscribed after the game: runs once the game has handled the same event
        client.NpcEvent += e => { if (e.Type == "lineDelta") _labelWhileStreaming = game.Emotion; };
    }

    static void Turn(string key, TavernGame game, TalkResult result)
    {
        Say(key + "-line", result.Line);
        Say(key + "-subtitle", game.Subtitle);
        Say(key + "-streamed", game.StreamedSubtitle);
        Say(key + "-stream", "deltas=" + game.Deltas + " resets=" + game.Resets);
        Say(key + "-emotion", _labelWhileStreaming + " result=" + result.Emotion + " label=" + game.Emotion);
        _labelWhileStreaming = null;
        Say(key + "-options", result.PlayerOptions.Count + " " + string.Join("|", result.PlayerOptions));
        Say(key + "-buttons", game.Choices.Count + " " + string.Join("|", game.Choices.ConvertAll(c => c.Npc + ">" + c.Line)));
        Say(key + "-fallback", result.IsFallback);
    }

    // The "Game state:" lines of the NPC's last prompt, as its saved transcript keeps it.
    static string GameStateOfLastPrompt(Dictionary<string, object> state)
    {
        string prompt = null;
        foreach (var entry in Entries(state))
        {
            var e = entry as Dictionary<string, object>;
            if (e != null && Equals(Get(e, "kind"), "prompt")) prompt = Get(e, "text") as string;
        }
        if (prompt == null) return "(no prompt)";
        var lines = new List<string>();
        bool inState = false;
        foreach (var line in prompt.Split('\n'))
        {
            if (line == "Game state:") inState = true;
            else if (inState && line.Contains(": ") && !line.StartsWith("Player:") && !line.StartsWith("Situation:")) lines.Add(line);
            else inState = false;
        }
        return string.Join("|", lines);
    }

    static List<object> Entries(Dictionary<string, object> state)
    {
        var outer = Get(state, "transcript") as Dictionary<string, object>;
        var inner = Get(outer, "transcript") as Dictionary<string, object>;
        return Get(inner, "entries") as List<object> ?? new List<object>();
    }

    static object Get(Dictionary<string, object> o, string key)
    {
        object value;
        return o != null && o.TryGetValue(key, out value) ? value : null;
    }

    static string Describe(Dictionary<string, object> availability)
    {
        return Get(availability, "status") + " available=" + Json.Write(Get(availability, "available"));
    }

    static bool Exited(int pid)
    {
        try { return System.Diagnostics.Process.GetProcessById(pid).HasExited; }
        catch (ArgumentException) { return true; }  // no such process any more
    }
}
