// Many turns on one session through the package, as a long game session would run them:
//   mono turns.exe EXECUTABLE TURNS BUCKET
// The client spawns `EXECUTABLE stdio`; every turn calls the client tool `look` once (answered on the
// pumping main thread) and then answers. Each reply is checked; per BUCKET turns one line
// `bucket: FIRST-LAST MS_PER_TURN MANAGED_KIB`, then `turns: N` (bench/unity_turns.py reads them).
// Exit 0, or 1 with the first wrong reply or error.

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading.Tasks;
using Oamd;

static class Turns
{
    static int Main(string[] args)
    {
        string executable = args[0];
        int turns = int.Parse(args[1]);
        int bucket = int.Parse(args[2]);
        try
        {
            var client = OamdClient.StartAsync(new OamdProcessOptions { ExecutablePath = executable })
                .GetAwaiter().GetResult();
            using (client)
            {
                var look = client.RegisterTool(
                    ToolDefinition.WithStringArguments("look", "Look at a thing.", "thing"),
                    call => call.Argument("thing") + ": a jar");
                var model = new ScriptedModel();
                for (int i = 0; i < turns; i++)
                {
                    model.ToolCall("look", new Dictionary<string, object> { { "thing", "shelf " + i } })
                        .Template("{toolOutput}");
                }
                Pumped(client, client.CreateSessionAsync("shop", "You keep a shop.", new[] { look }, model));
                var clock = Stopwatch.StartNew();
                for (int i = 0; i < turns; i++)
                {
                    var reply = Pumped(client, client.RespondAsync("shop", "What is on shelf " + i + "?"));
                    if (reply.Text != "shelf " + i + ": a jar")
                    {
                        Console.WriteLine("error: turn " + i + " answered " + reply.Text);
                        return 1;
                    }
                    if ((i + 1) % bucket == 0)
                    {
                        double ms = clock.Elapsed.TotalMilliseconds / bucket;
                        long kib = GC.GetTotalMemory(true) / 1024; // after a collection: what is held
                        Console.WriteLine("bucket: " + (i + 2 - bucket) + "-" + (i + 1) + " " + ms.ToString("F3") + " " + kib);
                        clock.Restart();
                    }
                }
                Console.WriteLine("turns: " + turns);
            }
            return 0;
        }
        catch (Exception ex)
        {
            Console.WriteLine("error: " + ex);
            return 1;
        }
    }

    // No SynchronizationContext: the main thread pumps the client's callbacks while it waits, as a
    // game's Update loop would (every millisecond here, not every frame: the cost measured is the
    // client's and the daemon's, not a frame's wait).
    static T Pumped<T>(OamdClient client, Task<T> task)
    {
        while (!task.IsCompleted) client.Pump(TimeSpan.FromMilliseconds(1));
        return task.GetAwaiter().GetResult();
    }
}
