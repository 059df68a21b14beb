// The Tavern sample's game, in plain C# (no UnityEngine type): TavernUI.cs draws it in Unity, and
// clients/unity/smoke/Tavern.cs plays it headless under Mono (tests/test_unity_tavern.py). Two NPCs
// share the world "tavern": Mira the innkeeper, who knows the menu and serves it through the client tool
// place_order (answered here, from the game's own state), and Brom at the door, who barks when the player
// comes in and decides whether to let them in. Build it on the main thread (Start of a MonoBehaviour):
// every await continues there, on Unity's SynchronizationContext, so the game state and the streamed
// subtitle are only touched on that thread, and a talk's npc/event lines are in before its result.

using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Oamd;

namespace OamdSamples.Tavern
{
    /// <summary>A line the player can say, shown as a button: to whom and what.</summary>
    public sealed class Choice
    {
        public readonly string Npc;
        public readonly string Line;

        public Choice(string npc, string line)
        {
            Npc = npc;
            Line = line;
        }
    }

    public sealed class TavernGame : IDisposable
    {
        public const string World = "tavern";
        public const string Innkeeper = "mira";
        public const string Guard = "brom";
        public const int StartingGold = 10;
        public static readonly string[] TimesOfDay = { "evening", "night", "morning" };

        /// <summary>Prices in gold a unit: the game's truth, which Mira's knowledge and place_order both read.</summary>
        public static readonly Dictionary<string, int> Menu = new Dictionary<string, int> {
            { "ale", 3 }, { "stew", 5 }, { "room", 8 },
        };

        /// <summary>Scripted NPCs (TavernScripts: no model needed, the same lines every run), else the
        /// daemon's own model (<c>--model</c>) speaks for them.</summary>
        public readonly bool UseScriptedModels;

        public int Gold { get; private set; }
        public string TimeOfDay { get; private set; }
        public bool DoorOpen { get; private set; }
        public bool Busy { get; private set; }

        /// <summary>Who speaks now, and the subtitle as it streams (then the line that stands).</summary>
        public string Speaker { get; private set; }
        public string Subtitle { get; private set; }
        /// <summary>The speaker's emotion (from the emotion event while streaming, then the result's).</summary>
        public string Emotion { get; private set; }
        /// <summary>The player's buttons: the last speaker's playerOptions, and a line to the other NPC.</summary>
        public List<Choice> Choices { get; private set; }
        /// <summary>How the last line streamed: deltas appended, resets (words the daemon took back), and
        /// the subtitle the events had built when the result came (equal to the line unless one was lost).</summary>
        public int Deltas { get; private set; }
        public int Resets { get; private set; }
        public string StreamedSubtitle { get; private set; }

        /// <summary>Anything shown changed; raised on the main thread.</summary>
        public event Action Changed;

        readonly OamdClient _client;
        readonly ToolDefinition _placeOrder;

        TavernGame(OamdClient client, bool useScriptedModels)
        {
            _client = client;
            UseScriptedModels = useScriptedModels;
            Gold = StartingGold;
            TimeOfDay = TimesOfDay[0];
            Subtitle = "";
            Choices = Openers();
            _client.NpcEvent += OnNpcEvent;
            var parameters = new Dictionary<string, object> {
                { "type", "object" },
                { "properties", new Dictionary<string, object> {
                    { "item", new Dictionary<string, object> { { "type", "string" }, { "enum", new List<object>(Menu.Keys) } } },
                    { "quantity", new Dictionary<string, object> { { "type", "integer" }, { "minimum", 1 }, { "maximum", 10 } } },
                } },
                { "required", new List<object> { "item", "quantity" } },
            };
            _placeOrder = _client.RegisterTool(
                new ToolDefinition("place_order", "Serve the guest from the menu; the game takes their gold. Says what was served and the gold left.", parameters),
                PlaceOrder);
        }

        /// <summary>A new evening: the world and both NPCs are made on <paramref name="client"/>.</summary>
        public static async Task<TavernGame> OpenAsync(OamdClient client, bool useScriptedModels)
        {
            var game = new TavernGame(client, useScriptedModels);
            try
            {
                await client.CreateWorldAsync(World, game.WorldState());
                await client.CreateNpcAsync(InnkeeperPersona(), Innkeeper, new[] { game._placeOrder }, World,
                    game.UseScriptedModels ? TavernScripts.Innkeeper() : null, InnkeeperOptions());
                await client.CreateNpcAsync(GuardPersona(), Guard, null, World,
                    game.UseScriptedModels ? TavernScripts.Guard() : null, GuardOptions());
                return game;
            }
            catch
            {
                game.Dispose();  // its tool handler and event subscription go with it
                throw;
            }
        }

        /// <summary>A saved evening (SaveAsync's text) on <paramref name="client"/>, typically a fresh daemon.</summary>
        public static async Task<TavernGame> LoadAsync(OamdClient client, string saved, bool useScriptedModels)
        {
            var save = Json.Read(saved) as Dictionary<string, object>;
            if (save == null || !Equals(Get(save, "sample"), "tavern")) throw new FormatException("Not a Tavern save.");
            var game = new TavernGame(client, useScriptedModels);
            game.Gold = (int)ToLong(Get(save, "gold"), StartingGold);
            game.TimeOfDay = Get(save, "timeOfDay") as string ?? TimesOfDay[0];
            game.DoorOpen = Equals(Get(save, "doorOpen"), true);
            try
            {
                // The world first: the NPCs' states name it, and their restore links them to it again.
                await client.CreateWorldAsync(World, Get(save, "world") as Dictionary<string, object>);
                var npcs = Get(save, "npcs") as Dictionary<string, object>;
                // A save holds no model and no tool handler: the script (or the daemon's model) and
                // place_order, whose handler this game registered, are given again.
                await client.RestoreNpcAsync(Get(npcs, Innkeeper) as Dictionary<string, object>, Innkeeper,
                    new[] { game._placeOrder }, game.UseScriptedModels ? TavernScripts.InnkeeperAfterLoad() : null);
                await client.RestoreNpcAsync(Get(npcs, Guard) as Dictionary<string, object>, Guard,
                    null, game.UseScriptedModels ? TavernScripts.Guard() : null);
                return game;
            }
            catch
            {
                game.Dispose();
                throw;
            }
        }

        /// <summary>The evening as text: the game's own state, the world document and each NPC's
        /// npc/state (persona, memory, relationship, transcript). Write it to a file; LoadAsync reads it.</summary>
        public async Task<string> SaveAsync()
        {
            var save = new Dictionary<string, object> {
                { "sample", "tavern" }, { "version", 1 },
                { "gold", Gold }, { "timeOfDay", TimeOfDay }, { "doorOpen", DoorOpen },
                { "world", await _client.WorldSnapshotAsync(World) },
                { "npcs", new Dictionary<string, object> {
                    { Innkeeper, await _client.NpcStateAsync(Innkeeper) },
                    { Guard, await _client.NpcStateAsync(Guard) },
                } },
            };
            return Json.Write(save);
        }

        /// <summary>The player comes in: Brom barks at them, then decides whether they may stay.</summary>
        public async Task<Decision> PlayerEntersAsync()
        {
            Begin(Guard);
            try
            {
                Subtitle = await _client.BarkAsync(Guard, "A traveller comes in out of the rain, at " + TimeOfDay + ".");
                Raise();
                var request = new DecisionRequest("A traveller with " + Gold + " gold stands at the door at " + TimeOfDay + ".")
                    .Option("let_in", "Step aside and let the traveller in.")
                    .Option("turn_away", "Keep the door shut: the tavern is full of trouble already.");
                request.Actor = Guard;  // decided as Brom, with his persona
                request.Context = new Dictionary<string, object> { { "gold", Gold }, { "timeOfDay", TimeOfDay } };
                request.FallbackOptionId = "let_in";  // a failing model must not lock the player out
                var decision = await _client.DecideAsync(request, UseScriptedModels ? TavernScripts.GuardDecision() : null);
                DoorOpen = decision.OptionId == "let_in";
                await _client.WorldSetAsync(World, "door.open", DoorOpen);
                if (!DoorOpen) Choices = new List<Choice> { new Choice(Guard, "Come on, let me in.") };
                return decision;
            }
            finally
            {
                End();
            }
        }

        /// <summary>The player says <paramref name="line"/> to <paramref name="npc"/>; the subtitle streams.</summary>
        public async Task<TalkResult> SayAsync(string npc, string line)
        {
            Begin(npc);
            try
            {
                var result = await _client.TalkAsync(npc, line, stream: true);
                // The events came first (this continues on the main thread after them); the line stands.
                StreamedSubtitle = Subtitle;
                Subtitle = result.Line;
                Emotion = result.Emotion;
                Choices = new List<Choice>();
                foreach (var option in result.PlayerOptions) Choices.Add(new Choice(npc, option));
                foreach (var opener in Openers())
                    if (opener.Npc != npc) Choices.Add(opener);
                return result;
            }
            finally
            {
                End();
            }
        }

        public Task<TalkResult> ChooseAsync(Choice choice)
        {
            return SayAsync(choice.Npc, choice.Line);
        }

        /// <summary>A game event: time passes. The NPCs read the world's timeOfDay in their next turn.</summary>
        public async Task PassTimeAsync()
        {
            TimeOfDay = TimesOfDay[(Array.IndexOf(TimesOfDay, TimeOfDay) + 1) % TimesOfDay.Length];
            await _client.WorldSetAsync(World, "timeOfDay", TimeOfDay);
            Raise();
        }

        public void Dispose()
        {
            _client.NpcEvent -= OnNpcEvent;
            _client.UnregisterTool(_placeOrder.Name);
        }

        // ---- the client tool -------------------------------------------------------------------

        async Task<object> PlaceOrder(ToolCall call, CancellationToken cancellation)
        {
            string item = (call.Argument("item") as string ?? "").Trim().ToLowerInvariant();
            long quantity = ToLong(call.Argument("quantity"), 1);
            int price;
            // Outputs the model reads and words its line from: plain facts, no quotes.
            if (!Menu.TryGetValue(item, out price))
                return "Nothing served: there is no " + item + " on the menu, only " + string.Join(", ", Menu.Keys) + ".";
            if (quantity < 1 || quantity > 10) return "Nothing served: orders are of 1 to 10.";
            long cost = price * quantity;
            if (cost > Gold) return "Nothing served: " + quantity + " " + item + " cost " + cost + " gold, the guest has " + Gold + ".";
            Gold -= (int)cost;
            // The world follows the game, so an NPC reading player.gold sees what is left.
            await _client.WorldSetAsync(World, "player.gold", Gold, cancellation);
            Raise();
            return "Served " + quantity + " " + item + " for " + cost + " gold; the guest has " + Gold + " gold left.";
        }

        // ---- streamed subtitles ----------------------------------------------------------------

        void OnNpcEvent(NpcEventArgs e)
        {
            if (e.Npc != Speaker) return;
            switch (e.Type)
            {
                case "lineDelta":
                    Subtitle += e.Delta;
                    Deltas++;
                    break;
                case "lineReset":
                    // The daemon took the streamed words back (a retried answer, a cleaned line, a
                    // fallback): show its whole line instead, never append to the old one.
                    Subtitle = e.Line ?? "";
                    Resets++;
                    break;
                case "emotion":
                    Emotion = e.Emotion;
                    break;
                default:
                    return;  // toolCallStarted/Completed: a game might show "Mira pours…"
            }
            Raise();
        }

        void Begin(string npc)
        {
            if (Busy) throw new InvalidOperationException("Someone is still speaking.");
            Busy = true;
            Speaker = npc;
            Subtitle = "";
            StreamedSubtitle = null;
            Deltas = Resets = 0;
            Raise();
        }

        void End()
        {
            Busy = false;
            Raise();
        }

        void Raise()
        {
            var changed = Changed;
            if (changed != null) changed();
        }

        // ---- who they are ------------------------------------------------------------------------

        static List<Choice> Openers()
        {
            return new List<Choice> {
                new Choice(Innkeeper, "Two ales, please."),
                new Choice(Guard, "Any trouble tonight?"),
            };
        }

        Dictionary<string, object> WorldState()
        {
            return new Dictionary<string, object> {
                { "timeOfDay", TimeOfDay },
                { "player", new Dictionary<string, object> { { "gold", Gold } } },
                { "door", new Dictionary<string, object> { { "open", DoorOpen } } },
            };
        }

        static Persona InnkeeperPersona()
        {
            var knowledge = new List<string>();
            foreach (var entry in Menu) knowledge.Add("On the menu: " + entry.Key + " for " + entry.Value + " gold.");
            knowledge.Add("You serve food and drink only through place_order, which takes the guest's gold.");
            var persona = new Persona("Mira") {
                Role = "innkeeper of the Drowned Lantern",
                Personality = "Warm and quick, and she counts every coin.",
                SpeakingStyle = "Short, friendly sentences.",
                Goals = new List<string> { "Keep her guests fed, happy and paying." },
                Knowledge = knowledge,
            };
            persona.Extra["defaultEmotion"] = "happy";
            return persona;
        }

        static Dictionary<string, object> InnkeeperOptions()
        {
            return new Dictionary<string, object> {
                // read in every turn's prompt ("Game state: …"), and through read_world_state
                { "worldContextPaths", new List<object> { "timeOfDay", "player.gold" } },
                { "worldReadable", new List<object> { "timeOfDay", "player" } },
                // she may remember the guest and warm to them; both survive a save
                { "memoryTools", new List<object> { "rememberFact", "changeRelationship" } },
                { "playerOptionCount", 3 },
            };
        }

        static Persona GuardPersona()
        {
            return new Persona("Brom") {
                Role = "the tavern's door guard",
                Personality = "Gruff and suspicious, fair to those who pay.",
                SpeakingStyle = "Few words.",
            };
        }

        static Dictionary<string, object> GuardOptions()
        {
            return new Dictionary<string, object> {
                { "worldContextPaths", new List<object> { "timeOfDay", "door.open" } },
                { "worldReadable", new List<object>() },  // nothing to look up: the prompt has it
                { "playerOptionCount", 2 },
            };
        }

        static object Get(Dictionary<string, object> o, string key)
        {
            object value;
            return o != null && o.TryGetValue(key, out value) ? value : null;
        }

        static long ToLong(object value, long otherwise)
        {
            if (value is long) return (long)value;
            if (value is double && Math.Abs((double)value) < long.MaxValue) return (long)Math.Round((double)value);
            return otherwise;
        }
    }
}
