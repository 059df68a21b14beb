// The Tavern's scripted models (TavernGame.UseScriptedModels): each NPC plays fixed steps instead of a
// language model (protocol/SCRIPTED.md), so the sample runs without a model file and the same way every
// run: the headless test checks it line by line. A script answers in order, whatever the player says; once
// it is used up its fallback answers. With a real model (--model llamacpp) none of this is sent.

using System.Collections.Generic;
using Oamd;

namespace OamdSamples.Tavern
{
    public static class TavernScripts
    {
        /// <summary>Mira: the first order goes through her memory tools and place_order, and her line
        /// quotes what the game answered ({toolOutput}); the second turn is a plain structured reply.</summary>
        public static ScriptedModel Innkeeper()
        {
            return new ScriptedModel()
                // one tool round: her built-in memory tools (executed by the daemon)
                .Step(Calls(
                    Call("remember_fact", "fact", "The traveller drinks ale."),
                    Call("change_relationship", "reason", "A paying guest.", "delta", 5L)))
                // the next: the game's own tool, answered by TavernGame.PlaceOrder
                .ToolCall("place_order", Args("item", "ale", "quantity", 2L))
                .Template(ReplyJson("happy", "{toolOutput} Anything else, love?",
                    "A room for the night?", "Some stew?", "That is all."))
                .Json(Reply("worried", "Rooms are 8 gold a night, and it is getting late.",
                    "I will sleep in the stable.", "Just another ale.", "Good night."))
                .Fallback(JsonStep(Reply("neutral", "I am only a script: run the sample with a model to talk on.",
                    "Fair enough.", "Goodbye.", "One more ale.")));
        }

        /// <summary>Mira after a load: the model is not part of the save, so she gets a script again.</summary>
        public static ScriptedModel InnkeeperAfterLoad()
        {
            return new ScriptedModel()
                .Json(Reply("happy", "Back again? I kept your seat by the fire.",
                    "Thank you, Mira.", "Two more ales.", "Goodbye."))
                .Fallback(JsonStep(Reply("neutral", "I am only a script: run the sample with a model to talk on.",
                    "Fair enough.", "Goodbye.", "One more ale.")));
        }

        /// <summary>Brom stands for a text-only model ("style": "envelope"), which writes its JSON as
        /// plain text: his first answer leaves out player_options, so the daemon asks again, and the
        /// words it had streamed are taken back with a lineReset before the repaired line streams.</summary>
        public static object Guard()
        {
            var script = new ScriptedModel()
                .Step(Raw("Wipe your boots, stranger. Trouble stays outside.", 1))
                .Step(Raw("{\"emotion\": \"suspicious\", \"line\": \"Trouble? Not while I stand at this door.\"}", 4))
                .Step(Raw(Json.Write(Reply("suspicious", "Trouble stays outside while I stand here.",
                    "Glad to hear it.", "Who would dare?")), 4))
                .Fallback(Raw(Json.Write(Reply("neutral", "Move along.", "Fine.", "Good night.")), 1));
            // ScriptedModel names no style: the spec as JSON, one member added, is what the daemon reads
            var spec = (Dictionary<string, object>)script.ToJson();
            spec["style"] = "envelope";
            return spec;
        }

        /// <summary>Brom's decision at the door: a decision step is {reasoning, choice, confidence}.</summary>
        public static ScriptedModel GuardDecision()
        {
            return new ScriptedModel().Json(new Dictionary<string, object> {
                { "reasoning", "Dry boots, a full purse, and it is early." }, { "choice", "let_in" }, { "confidence", 80 },
            });
        }

        // ---- the shapes of the steps -------------------------------------------------------------

        /// <summary>An NPC reply as npc/talk asks for it (the schema's snake_case names).</summary>
        static Dictionary<string, object> Reply(string emotion, string line, params string[] options)
        {
            return new Dictionary<string, object> {
                { "emotion", emotion }, { "line", line },
                { "player_options", new List<object>(options) }, { "ends_conversation", false },
            };
        }

        /// <summary>A reply as template text: {toolOutput} is filled in, so it must stay JSON once it is
        /// (the game's tool outputs hold no quotes).</summary>
        static string ReplyJson(string emotion, string line, params string[] options)
        {
            return Json.Write(Reply(emotion, line, options));
        }

        static Dictionary<string, object> JsonStep(object value)
        {
            return new Dictionary<string, object> { { "json", value } };
        }

        static Dictionary<string, object> Raw(string text, int chunks)
        {
            return new Dictionary<string, object> { { "raw", text }, { "chunks", chunks } };
        }

        static Dictionary<string, object> Calls(params Dictionary<string, object>[] calls)
        {
            return new Dictionary<string, object> { { "toolCalls", new List<object>(calls) } };
        }

        static Dictionary<string, object> Call(string name, params object[] arguments)
        {
            return new Dictionary<string, object> { { "name", name }, { "arguments", Args(arguments) } };
        }

        static Dictionary<string, object> Args(params object[] pairs)
        {
            var arguments = new Dictionary<string, object>();
            for (int i = 0; i + 1 < pairs.Length; i += 2) arguments[(string)pairs[i]] = pairs[i + 1];
            return arguments;
        }
    }
}
