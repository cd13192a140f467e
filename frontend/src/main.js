import "./style.css";
import { boot } from "./app.js";

boot();
