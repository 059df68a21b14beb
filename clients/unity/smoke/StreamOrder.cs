// The order the package promises with a SynchronizationContext: a turn's events run before the code
// awaiting its result, also when the result is in before the await is reached (a fast daemon and a main
// thread that lost its core between sending and awaiting, as on a busy machine):
//   mono streamorder.exe EXECUTABLE TURNS
// On MainLoop's context, TURNS streamed npc/talk turns of a scripted NPC; after each, the line its
// lineDelta events built must be the result's line. Prints `late: N` (turns whose events came after
// the result) and `turns: TURNS`; exit 0, or 1 with `error: ...`. Threads that spin and garbage that
// makes the collector stop the world make that race likely: a client without the order breaks it in
// several turns of 300 (clients/unity/com.oamd.client/Runtime/Callbacks.cs, `CatchUp`).

using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Oamd;

static class StreamOrder
{
    static int Main(string[] args)
    {
        try
        {
            MainLoop.Run(() => Run(args[0], int.Parse(args[1])));
            return 0;
        }
        catch (Exception ex)
        {
            Console.WriteLine("error: " + ex);
            return 1;
        }
    }

    static async Task Run(string exe, int turns)
    {
        // threads that only spin: the main thread now and then loses its core between sending a
        // request and awaiting it, as on a busy machine (the race this checks needs that)
        bool spinning = true;
        for (int i = 0; i < Environment.ProcessorCount; i++)
            new Thread(() => { while (Volatile.Read(ref spinning)) { } }) { IsBackground = true }.Start();
        using (var client = await OamdClient.StartAsync(new OamdProcessOptions { ExecutablePath = exe }))
        {
            string shown = "";
            client.NpcEvent += e => { if (e.Type == "lineDelta") shown += e.Delta; };
            var reply = new Dictionary<string, object> { { "emotion", "happy" }, { "line", "Another round!" } };
            var model = new ScriptedModel().Fallback(new Dictionary<string, object> { { "json", reply } });
            var options = new Dictionary<string, object> { { "playerOptionCount", 0 }, { "canEndConversation", false } };
            await client.CreateNpcAsync(new Persona("Mira"), "mira", model: model, options: options);
            int late = 0;
            var random = new Random(7);
            byte[] garbage = null;
            for (int i = 0; i < turns; i++)
            {
                shown = "";
                // garbage of a random size: the collector stops every thread at some allocation, now
                // and then one between sending the request and awaiting its reply
                garbage = new byte[random.Next(1 << 20)];
                var result = await client.TalkAsync("mira", "Another!", stream: true);
                if (shown != result.Line) late++;
                // the history would grow every turn; the order is all this checks
                if (i % 50 == 49) await client.ResetNpcAsync("mira");
            }
            Volatile.Write(ref spinning, false);
            GC.KeepAlive(garbage);
            Console.WriteLine("late: " + late);
            Console.WriteLine("turns: " + turns);
        }
    }
}
